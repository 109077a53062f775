fn main() {
    if git_agent::version_only() {
        return;
    }
    // Before anything else: secret variables leave the environment (see safety::secrets).
    git_agent::safety::secrets::scrub_environment();
    std::process::exit(git_agent::run());
}
