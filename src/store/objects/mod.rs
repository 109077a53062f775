//! Objects and refs: the one way to start git, trees and commits made from files, the compare-and-swap
//! transaction every move of a store ref goes through, and the notes on step commits. With the store's core
//! ([`super::repo`]) they are what every other part of the store builds on.

pub(crate) mod git;
pub(super) mod notes;
pub(crate) mod snapshot;
pub(crate) mod transaction;
