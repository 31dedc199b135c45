# Convenience targets; the README's commands are the reference.
.PHONY: fuzz fuzz-quick

# One hour over every fuzz target (libFuzzer with nightly cargo-fuzz, else the stable harness).
fuzz:
	scripts/fuzz.sh 3600

# The CI-sized run: each target for its fixed number of seeded cases.
fuzz-quick:
	cargo test --profile ci -p pmsim-fuzz --test harness
