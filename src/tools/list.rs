//! `read_file`.
