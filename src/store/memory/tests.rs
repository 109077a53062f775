//! The memory store against real repositories; `git fsck --strict` and `git show` are the oracles.

use super::merge::Merged;
use super::*;
use crate::store::test_repo::TestRepo;

fn entry(id: &str, text: &str) -> Entry {
    Entry {
        id: id.into(),
        text: text.into(),
        tags: vec!["build".into()],
        confidence: 0.5,
        created: 1,
        updated: 1,
        ..Entry::default()
    }
}

fn put(store: &Store, e: Entry) -> ObjectId {
    store
        .update_memory(|_| {
            Ok(Some(MemoryEdit {
                message: format!("remember {}: {}", e.id, e.text),
                put: vec![e.clone()],
                remove: vec![],
            }))
        })
        .unwrap()
        .unwrap()
}

#[test]
fn entries_are_files_and_the_index_follows_them() {
    let repo = TestRepo::with_commit("memory-files");
    let store = repo.store();
    assert!(store.memory_summaries().unwrap().is_empty());
    put(
        &store,
        entry("3f9a1c2e", "run make fixtures before the tests"),
    );
    put(&store, entry("3f001122", "CSS uses BEM"));
    put(&store, entry("a0b1c2d3", "deploy with ship.sh"));

    let shown = repo.git(&["show", "refs/agent/memory:entries/3f/3f9a1c2e.json"]);
    let parsed: Entry = serde_json::from_str(&shown).unwrap();
    assert_eq!(parsed.text, "run make fixtures before the tests");
    let index = repo.git(&["show", "refs/agent/memory:index/3f.jsonl"]);
    assert_eq!(index.lines().count(), 2, "{index}");
    assert!(
        index.lines().next().unwrap().contains("3f001122"),
        "sorted by id"
    );
    assert_eq!(
        repo.git(&["log", "--format=%s", "refs/agent/memory"])
            .lines()
            .collect::<Vec<_>>(),
        [
            "remember a0b1c2d3: deploy with ship.sh",
            "remember 3f001122: CSS uses BEM",
            "remember 3f9a1c2e: run make fixtures before the tests"
        ]
    );
    let mut ids: Vec<String> = store
        .memory_summaries()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["3f001122", "3f9a1c2e", "a0b1c2d3"]);

    assert_eq!(
        store.resolve_memory("3f9").unwrap(),
        Resolved::One("3f9a1c2e".into())
    );
    assert_eq!(
        store.resolve_memory("3f").unwrap(),
        Resolved::Many(vec!["3f001122".into(), "3f9a1c2e".into()])
    );
    assert_eq!(store.resolve_memory("ff").unwrap(), Resolved::None);
    assert_eq!(store.resolve_memory("zz").unwrap(), Resolved::None);

    // A purge removes the file and its index line, in a commit of its own.
    store
        .update_memory(|_| {
            Ok(Some(MemoryEdit {
                message: "forget 3f001122: purged".into(),
                put: vec![],
                remove: vec!["3f001122".into()],
            }))
        })
        .unwrap();
    assert_eq!(
        repo.git(&["show", "refs/agent/memory:index/3f.jsonl"])
            .lines()
            .count(),
        1
    );
    assert!(store.memory_entry("3f001122").unwrap().is_none());
    let old = store.memory_entry_in_history("3f0011").unwrap().unwrap();
    assert_eq!(old.text, "CSS uses BEM");
    repo.git(&["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn text_is_redacted_on_its_way_in() {
    let repo = TestRepo::with_commit("memory-redact");
    let store = repo.store();
    let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD";
    let mut e = entry("b0b0b0b0", &format!("the key is {key}"));
    e.sources.push(Source {
        why: format!("because {key}"),
        ..Source::default()
    });
    put(&store, e);
    let everything = repo.git(&["log", "-p", "refs/agent/memory"]);
    assert!(!everything.contains(key), "{everything}");
}

#[test]
fn a_write_that_lost_the_race_runs_again_on_the_new_state() {
    let repo = TestRepo::with_commit("memory-cas");
    let store = repo.store();
    let other = repo.store();
    let mut runs = 0;
    store
        .update_memory(|view| {
            runs += 1;
            if runs == 1 {
                // Another writer lands between our read and our swap.
                put(&other, entry("cccccccc", "from the other writer"));
            }
            let seen = view.summaries()?.len();
            Ok(Some(MemoryEdit {
                message: format!("remember dddddddd: saw {seen}"),
                put: vec![entry("dddddddd", &format!("saw {seen}"))],
                remove: vec![],
            }))
        })
        .unwrap();
    assert_eq!(runs, 2);
    let texts: Vec<String> = store
        .memory_summaries()
        .unwrap()
        .into_iter()
        .map(|s| s.text)
        .collect();
    assert!(
        texts.contains(&"from the other writer".to_string()),
        "{texts:?}"
    );
    assert!(
        texts.contains(&"saw 1".to_string()),
        "the retry saw the other entry: {texts:?}"
    );
}

#[test]
fn a_tree_without_an_index_is_read_from_its_entries() {
    let repo = TestRepo::with_commit("memory-noindex");
    let store = repo.store();
    put(&store, entry("e0e0e0e0", "kept"));
    // Someone rewrote the ref with plain git, without the index.
    let tree = repo.git(&["rev-parse", "refs/agent/memory:entries"]);
    let listing = format!("040000 tree {}\tentries\n", tree.trim());
    let root = mktree(&repo, &listing);
    let commit = repo.git(&["commit-tree", root.trim(), "-m", "by hand"]);
    repo.git(&["update-ref", "refs/agent/memory", commit.trim()]);
    let lines = store.memory_summaries().unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].text, "kept");
}

/// `git mktree` of `listing`.
fn mktree(repo: &TestRepo, listing: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .arg("mktree")
        .current_dir(repo.path(""))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(listing.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

fn clone_of(repo: &TestRepo, name: &str) -> TestRepo {
    let other = TestRepo::new(name);
    other.git(&[
        "fetch",
        "-q",
        repo.path("").to_str().unwrap(),
        "+refs/agent/memory:refs/agent/memory",
    ]);
    other
}

#[test]
fn merge_is_a_union_and_both_edits_of_one_entry_are_kept_for_review() {
    let a = TestRepo::with_commit("memory-merge-a");
    let sa = a.store();
    put(&sa, entry("11111111", "shared and used on both sides"));
    put(&sa, entry("22222222", "shared, edited on both sides"));
    put(&sa, entry("33333333", "shared, purged in b"));
    let b = clone_of(&a, "memory-merge-b");
    b.git(&["commit", "-q", "--allow-empty", "-m", "init"]);
    let sb = b.store();

    // A: a new entry, a use of 1111, an edit of 2222.
    put(&sa, entry("44444444", "only in a"));
    let mut used = entry("11111111", "shared and used on both sides");
    used.uses = 1;
    used.confidence = 0.6;
    put(&sa, used.clone());
    put(&sa, entry("22222222", "edited in a"));
    // B: a new entry, a use of 1111, another edit of 2222, a purge of 3333.
    put(&sb, entry("55555555", "only in b"));
    used.confidence = 0.4;
    put(&sb, used);
    put(&sb, entry("22222222", "edited in b"));
    sb.update_memory(|_| {
        Ok(Some(MemoryEdit {
            message: "forget 33333333: purged".into(),
            put: vec![],
            remove: vec!["33333333".into()],
        }))
    })
    .unwrap();

    b.git(&[
        "fetch",
        "-q",
        a.path("").to_str().unwrap(),
        "+refs/agent/memory:refs/theirs",
    ]);
    let theirs = sb.ref_target("refs/theirs").unwrap().unwrap();
    let ours = sb.memory_tip().unwrap().unwrap();
    let merged = sb.merge_memory(theirs, "a").unwrap();
    assert!(!merged.fast_forward);
    assert_eq!(merged.review, ["22222222"]);
    assert_eq!(merged.added, 1, "{merged:?}");
    let commit = merged.commit.unwrap();
    let parents = b.git(&["log", "-1", "--format=%P", &commit.to_string()]);
    assert_eq!(parents.trim(), format!("{ours} {theirs}"));

    let get = |id: &str| sb.memory_entry(id).unwrap();
    assert_eq!(get("44444444").unwrap().text, "only in a");
    assert_eq!(get("55555555").unwrap().text, "only in b");
    assert!(
        get("33333333").is_none(),
        "the purge stands: a did not change it"
    );
    let used = get("11111111").unwrap();
    assert_eq!(
        (used.uses, used.confidence, used.status),
        (2, 0.5, EntryStatus::Active)
    );
    let both = get("22222222").unwrap();
    assert_eq!(both.status, EntryStatus::NeedsReview);
    assert_eq!(both.text, "edited in b");
    assert_eq!(both.versions.len(), 1);
    assert_eq!(both.versions[0].text, "edited in a");
    // The index agrees with the entries.
    let lines = sb.memory_summaries().unwrap();
    let review = lines.iter().find(|l| l.id == "22222222").unwrap();
    assert_eq!(review.status, EntryStatus::NeedsReview);
    assert_eq!(lines.len(), 4);

    // Merging again changes nothing; A merging B's merge fast-forwards.
    assert_eq!(sb.merge_memory(theirs, "a").unwrap(), Merged::default());
    a.git(&[
        "fetch",
        "-q",
        b.path("").to_str().unwrap(),
        "+refs/agent/memory:refs/theirs",
    ]);
    let ff = sa
        .merge_memory(sa.ref_target("refs/theirs").unwrap().unwrap(), "b")
        .unwrap();
    assert!(ff.fast_forward);
    assert_eq!(sa.memory_tip().unwrap(), Some(commit));
    b.git(&["fsck", "--strict", "--no-dangling"]);
}
