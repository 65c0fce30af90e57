# Keel's recipes. `just --list` shows them all. CI runs `.ci/run`, which needs no `just`.

# The offline demo: a scripted session in a scratch copy of the sample project.
demo:
    cargo run --release -p keel-acp --bin keel -- demo

# The whole test suite (the README's test command).
test:
    cargo test --workspace --locked

# Installs `keel` into ~/.cargo/bin from this clone (profile `dist`: the release build without
# debug sections); then `keel doctor` checks the setup and prints the Zed settings for the
# installed binary.
install:
    cargo install --locked --profile dist --path crates/acp

# Lints as CI runs them.
lint:
    cargo clippy --workspace --all-targets --locked -- -D warnings

fmt:
    cargo fmt --all

# Benchmarks; numbers go to docs/benchmarks.md by hand after a run.
bench:
    scripts/bench-corpus.sh
    cargo bench -p keel-diff --bench diff
    cargo bench -p keel-core --bench tools
    cargo bench -p keel-core --bench search
    cargo bench -p keel-core --bench turn_loop
    cargo bench -p keel-core --bench sessions
    cargo bench -p keel-acp --bench acp
    cargo bench -p keel-acp --bench sessions
    cargo bench -p keel-acp --bench sandbox
    cargo bench -p keel-acp --bench load

# Records which functions an ACP session runs into crates/acp/link/hot-text.ld, the layout
# that keeps `keel acp`'s resident code small (docs/decisions/0019-hot-code-layout.md). Needs
# valgrind. Run after larger changes of code, dependencies or toolchain.
link-order:
    scripts/link-order.sh

# The coverage-guided fuzz target of `keel acp`'s wire (needs `cargo install cargo-fuzz`);
# docs/reliability.md records the runs. CI only compiles it (`cargo build -p keel-acp-fuzz`).
# The fuzz crate is a workspace member: the profile overrides keep the workspace's fat-LTO,
# one-unit release profile away from the instrumented build, which needs neither.
fuzz runs="1000000":
    cd crates/acp/fuzz && RUSTC_BOOTSTRAP=1 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo fuzz run wire --sanitizer none -- -runs={{runs}}

# The ACP Registry release: builds the linux-x86_64 release archive into dist/, fills
# crates/acp/registry/keel/agent.json (version, archive URL, sha256) from it and checks that the archive,
# unpacked in a clean directory, starts `keel acp` (docs/configuration.md, "The ACP Registry").
registry-archive:
    scripts/registry-archive.sh

# What CI runs.
ci:
    .ci/run

# Rustdoc with warnings as errors (as CI runs it).
doc:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

# The libraries and binaries at the `rust-version` Cargo.toml declares (as CI checks them).
msrv:
    rustup toolchain install "$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)" --profile minimal --no-self-update
    cargo +"$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)" check --workspace --exclude keel-acp-fuzz --locked
