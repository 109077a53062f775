fn main() {
    std::process::exit(git_agent::run());
}
