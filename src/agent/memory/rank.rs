//! Ranking memory entries against a prompt: BM25 over each entry's text and tags, weighted by the entry's
//! confidence and recency, then the best entries that fit the budget.
//!
//! BM25 rather than embeddings: it needs no model, no index beyond the entries themselves, and is exact about
//! the words that matter in a code base (file names, commands, identifiers), which is what entries and
//! prompts share. Tokens are lowercase alphanumeric runs, split at camelCase humps, with English function
//! words dropped and a light plural/-ing stemming, so `tests`, `testing` and `test` meet.
//!
//! One pass over the entries with no allocation per token (a reused buffer looked up in the query's terms):
//! 10,000 entries rank in a few milliseconds (`scripts/bench-memory.sh`).

use std::collections::{BTreeSet, HashMap};

use crate::store::memory::{EntryStatus, Summary};
use crate::sys::libm::ln;

/// BM25's term-frequency saturation and length normalisation, the usual values.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Tags are the author's own keywords: each counts as this many occurrences.
const TAG_WEIGHT: u32 = 2;
/// An entry whose text score is below this share of the best entry's only shares a common word with the
/// prompt: noise next to one that matches its subject.
const RELATIVE_CUTOFF: f64 = 0.2;
/// Recency halves its weight every this many days, down to a floor of one half: old entries are not wrong,
/// just less likely to still hold.
const HALF_LIFE_DAYS: f64 = 180.0;

/// English function words: they match every prompt and say nothing about a project.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "done", "each", "else", "for", "from", "had", "has", "have", "he", "her", "here", "him", "his",
    "how", "if", "in", "into", "is", "it", "its", "just", "let", "me", "more", "most", "must",
    "my", "no", "not", "now", "of", "on", "once", "only", "or", "other", "our", "out", "over",
    "please", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "very", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would",
    "you", "your",
];

/// One entry chosen for a prompt.
#[derive(Debug, Clone)]
pub struct Hit<'a> {
    pub entry: &'a Summary,
    /// BM25 times the confidence and recency weights.
    pub score: f64,
    /// Estimated tokens of its line in the memory message.
    pub tokens: u64,
}

/// How much memory may be injected.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub tokens: u64,
    pub max_entries: usize,
}

/// The active entries relevant to `prompt`, best first, as many as fit `budget` (an entry too big for what
/// is left is passed over for smaller ones after it). `now` is in Unix seconds.
pub fn retrieve<'a>(
    entries: &'a [Summary],
    prompt: &str,
    now: i64,
    budget: Budget,
) -> Vec<Hit<'a>> {
    let query = Query::new(prompt);
    if query.terms.is_empty() || budget.max_entries == 0 {
        return Vec::new();
    }
    let mut scored = query.bm25(entries);
    let best = scored.iter().map(|(_, s)| *s).fold(0.0, f64::max);
    scored.retain(|(_, s)| *s >= best * RELATIVE_CUTOFF);
    let mut hits: Vec<Hit<'a>> = scored
        .into_iter()
        .map(|(entry, bm25)| Hit {
            entry,
            score: bm25 * (0.5 + entry.confidence) * recency(entry.updated, now),
            tokens: line_tokens(entry),
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.entry.id.cmp(&b.entry.id))
    });
    let mut left = budget.tokens;
    let mut chosen = Vec::new();
    for hit in hits {
        if chosen.len() == budget.max_entries {
            break;
        }
        if hit.tokens <= left {
            left -= hit.tokens;
            chosen.push(hit);
        }
    }
    chosen
}

/// Estimated tokens of an entry's line in the memory message (4 bytes a token, as the context accounting).
pub fn line_tokens(entry: &Summary) -> u64 {
    ((entry.text.len() + entry.id.len() + entry.kind.as_str().len() + 16) / 4 + 1) as u64
}

/// 1 for an entry updated now, halving every [`HALF_LIFE_DAYS`] towards 0.5.
fn recency(updated: i64, now: i64) -> f64 {
    let days = (now - updated).max(0) as f64 / 86_400.0;
    0.5 + 0.5 * exp2(-days / HALF_LIFE_DAYS)
}

// The two transcendental functions ranking needs are written out (`ln` in `sys::libm`, `exp2` here):
// `f64::ln` and `f64::powf` are calls into the C maths library, and without them `libm.so` is not loaded at
// all (issue 16). Ranking needs a dozen digits.

/// `2^y` for `y <= 0` (0 below 2^-1022): `2^y = 2^k * e^(f ln 2)` with `k` the integer below `y`, `f` in
/// [0, 1), and the exponential's series (18 terms: `f ln 2 < 0.7`).
fn exp2(y: f64) -> f64 {
    debug_assert!(y <= 0.0, "exp2 of {y}");
    if y.is_nan() || y < -1022.0 {
        return 0.0;
    }
    let mut k = y as i64; // towards zero: one less for a negative fraction
    if k as f64 > y {
        k -= 1;
    }
    let x = (y - k as f64) * std::f64::consts::LN_2;
    let (mut term, mut sum) = (1.0, 1.0);
    for n in 1..18 {
        term *= x / f64::from(n);
        sum += term;
    }
    sum * f64::from_bits(((k + 1023) as u64) << 52)
}

/// An entry sharing terms with the query: its length in terms and `(term, frequency)` of the shared ones.
type Matched<'a> = (&'a Summary, u32, Vec<(usize, u32)>);

/// The prompt's distinct terms.
struct Query {
    terms: HashMap<String, usize>,
}

impl Query {
    fn new(prompt: &str) -> Query {
        let mut terms = HashMap::new();
        for_each_token(prompt, &mut String::new(), |token| {
            let next = terms.len();
            terms.entry(token.to_owned()).or_insert(next);
        });
        Query { terms }
    }

    /// The BM25 score of every active entry sharing a term with the query.
    fn bm25<'a>(&self, entries: &'a [Summary]) -> Vec<(&'a Summary, f64)> {
        let mut df = vec![0u32; self.terms.len()];
        let mut matched: Vec<Matched<'a>> = Vec::new();
        let (mut docs, mut total_len) = (0u64, 0u64);
        let mut buf = String::new();
        for entry in entries.iter().filter(|e| e.status == EntryStatus::Active) {
            let mut len = 0u32;
            let mut tf: Vec<(usize, u32)> = Vec::new();
            let mut count = |token: &str, weight: u32| {
                len += weight;
                if let Some(&term) = self.terms.get(token) {
                    match tf.iter_mut().find(|(t, _)| *t == term) {
                        Some((_, n)) => *n += weight,
                        None => tf.push((term, weight)),
                    }
                }
            };
            for_each_token(&entry.text, &mut buf, |t| count(t, 1));
            for tag in &entry.tags {
                for_each_token(tag, &mut buf, |t| count(t, TAG_WEIGHT));
            }
            docs += 1;
            total_len += u64::from(len);
            if !tf.is_empty() {
                for (term, _) in &tf {
                    df[*term] += 1;
                }
                matched.push((entry, len, tf));
            }
        }
        if docs == 0 {
            return Vec::new();
        }
        let avg = total_len as f64 / docs as f64;
        let n = docs as f64;
        matched
            .into_iter()
            .map(|(entry, len, tf)| {
                let score = tf
                    .iter()
                    .map(|&(term, f)| {
                        let df = f64::from(df[term]);
                        let idf = ln(1.0 + (n - df + 0.5) / (df + 0.5));
                        let f = f64::from(f);
                        let norm = 1.0 - B + B * f64::from(len) / avg.max(1.0);
                        idf * f * (K1 + 1.0) / (f + K1 * norm)
                    })
                    .sum();
                (entry, score)
            })
            .collect()
    }
}

/// The distinct terms of `text`, for near-duplicate checks.
pub fn term_set(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for_each_token(text, &mut String::new(), |t| {
        out.insert(t.to_owned());
    });
    out
}

/// True when `a` and `b` say the same thing in nearly the same words: their term sets overlap by at least
/// 70% (Jaccard), or are equal for very short texts.
pub fn near_duplicate(a: &BTreeSet<String>, b: &BTreeSet<String>) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let shared = a.intersection(b).count();
    let union = a.len() + b.len() - shared;
    if a.len().min(b.len()) < 3 {
        return shared == union;
    }
    shared as f64 / union as f64 >= 0.7
}

/// Calls `f` with each term of `text`, built in `buf` (reused, so no allocation per token).
fn for_each_token(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        let mut start = 0;
        let mut prev_lower = false;
        for (i, c) in run.char_indices() {
            // A camelCase hump starts a new part: `parseConfig` is `parse` and `config`.
            if c.is_uppercase() && prev_lower {
                emit(&run[start..i], buf, &mut f);
                start = i;
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
        }
        emit(&run[start..], buf, &mut f);
    }
}

fn emit(part: &str, buf: &mut String, f: &mut impl FnMut(&str)) {
    buf.clear();
    buf.extend(part.chars().flat_map(char::to_lowercase));
    if buf.len() < 2 || STOPWORDS.binary_search(&buf.as_str()).is_ok() {
        return;
    }
    stem(buf);
    f(buf);
}

/// Plurals and `-ing` off: `tests`/`testing` -> `test`, `libraries` -> `library`; short words are left alone.
fn stem(word: &mut String) {
    let len = word.len();
    if len > 5 && word.ends_with("ing") {
        word.truncate(len - 3);
    } else if len > 4 && word.ends_with("ies") {
        word.truncate(len - 3);
        word.push('y');
    } else if len > 3
        && word.ends_with('s')
        && !(word.ends_with("ss") || word.ends_with("us") || word.ends_with("is"))
    {
        word.truncate(len - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::Kind;

    #[test]
    fn ln_and_exp2_agree_with_the_maths_library() {
        let mut x = 1.0f64;
        while x < 1e12 {
            let (ours, libm) = (ln(x), x.ln());
            assert!(
                (ours - libm).abs() <= 1e-12 * libm.abs().max(1.0),
                "ln {x}: {ours} vs {libm}"
            );
            x = x * 1.37 + 0.11;
        }
        for x in [
            1e-300,
            0.001,
            0.5,
            0.999_999,
            1.5,
            1.999_999_9,
            2.0,
            3.0,
            f64::MAX,
        ] {
            let (ours, libm) = (ln(x), x.ln());
            assert!(
                (ours - libm).abs() <= 1e-12 * libm.abs().max(1.0),
                "ln {x}: {ours} vs {libm}"
            );
        }
        let mut y = 0.0f64;
        while y > -1100.0 {
            let (ours, libm) = (exp2(y), y.exp2());
            let tolerance = if y < -1022.0 { 1e-307 } else { 1e-13 * libm };
            assert!(
                (ours - libm).abs() <= tolerance,
                "exp2 {y}: {ours} vs {libm}"
            );
            y -= 0.173;
        }
        assert_eq!(exp2(-1.0), 0.5);
        assert_eq!(exp2(-3.0), 0.125);
    }

    fn summary(id: &str, text: &str, tags: &[&str], confidence: f64) -> Summary {
        Summary {
            id: id.into(),
            status: EntryStatus::Active,
            kind: Kind::Fact,
            confidence,
            uses: 0,
            updated: 1_700_000_000,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            text: text.into(),
        }
    }

    fn ids(hits: &[Hit<'_>]) -> Vec<String> {
        hits.iter().map(|h| h.entry.id.clone()).collect()
    }

    const ROOMY: Budget = Budget {
        tokens: 10_000,
        max_entries: 20,
    };

    #[test]
    fn stopwords_are_sorted_for_the_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOPWORDS);
    }

    #[test]
    fn terms_split_humps_drop_function_words_and_stem() {
        let terms: Vec<String> =
            term_set("The parseConfig tests are failing in src/config_loader.rs")
                .into_iter()
                .collect();
        assert_eq!(
            terms,
            ["config", "fail", "loader", "parse", "rs", "src", "test"]
        );
    }

    #[test]
    fn relevant_entries_rank_and_irrelevant_ones_stay_out() {
        let entries = vec![
            summary(
                "aaaa0001",
                "The parser tests need `make fixtures` first",
                &["test"],
                0.5,
            ),
            summary("aaaa0002", "Deploy with ./ship.sh prod", &["deploy"], 0.9),
            summary("aaaa0003", "CSS class names follow BEM", &[], 0.9),
            summary(
                "aaaa0004",
                "Parser errors carry a span; keep it when wrapping",
                &["parser"],
                0.5,
            ),
        ];
        let hits = retrieve(&entries, "fix the flaky parser test", 1_700_000_000, ROOMY);
        assert_eq!(ids(&hits), ["aaaa0001", "aaaa0004"]);
        assert!(retrieve(&entries, "the and of", 1_700_000_000, ROOMY).is_empty());
    }

    #[test]
    fn archived_entries_are_never_ranked() {
        let mut archived = summary("bbbb0001", "parser tests need fixtures", &[], 0.9);
        archived.status = EntryStatus::Archived;
        let mut review = summary("bbbb0002", "parser tests need fixtures", &[], 0.9);
        review.status = EntryStatus::NeedsReview;
        let entries = [archived, review];
        assert!(retrieve(&entries, "parser tests", 1_700_000_000, ROOMY).is_empty());
    }

    #[test]
    fn confidence_and_recency_order_equal_matches() {
        let mut old = summary("cccc0001", "run the linter with make lint", &[], 0.9);
        old.updated = 1_700_000_000 - 365 * 86_400;
        let entries = vec![
            summary("cccc0002", "run the linter with make lint", &[], 0.3),
            summary("cccc0003", "run the linter with make lint", &[], 0.9),
            old,
        ];
        let hits = retrieve(&entries, "lint", 1_700_000_000, ROOMY);
        assert_eq!(ids(&hits), ["cccc0003", "cccc0001", "cccc0002"]);
    }

    #[test]
    fn the_budget_caps_tokens_and_count() {
        let long = "lint ".repeat(200);
        let entries = vec![
            summary("dddd0001", &long, &[], 0.9),
            summary("dddd0002", "lint with make lint", &[], 0.5),
            summary("dddd0003", "lint is strict", &[], 0.5),
        ];
        let tight = Budget {
            tokens: 40,
            max_entries: 20,
        };
        let hits = retrieve(&entries, "lint", 1_700_000_000, tight);
        assert_eq!(
            ids(&hits),
            ["dddd0002", "dddd0003"],
            "the long one does not fit"
        );
        assert!(hits.iter().map(|h| h.tokens).sum::<u64>() <= 40);
        let one = Budget {
            tokens: 10_000,
            max_entries: 1,
        };
        assert_eq!(retrieve(&entries, "lint", 1_700_000_000, one).len(), 1);
    }

    #[test]
    fn near_duplicates_are_the_same_words_more_or_less() {
        let a = term_set("Run the tests with `make check`, not cargo test");
        let b = term_set("run tests with make check (not cargo test)");
        let c = term_set("Tests need make fixtures first");
        assert!(near_duplicate(&a, &b));
        assert!(!near_duplicate(&a, &c));
        assert!(!near_duplicate(&term_set("lint"), &term_set("lint strict")));
        assert!(near_duplicate(&term_set("linting"), &term_set("lint")));
    }
}
