# The two commands of README.md and docs/src/building.md:
#   make demo   sets up what is missing, builds the recipes into plugins/, starts a local
#               ZooKeeper and shows two contenders taking turns on a lock
#   make test   sets up what is missing and runs every test against real ZooKeeper
CARGO ?= cargo
GUEST_TARGET := wasm32-wasip2
GUEST_DIR := target/guests/$(GUEST_TARGET)/release
# Every crate under recipes/ is a recipe: recipes/X holds crate wazoo-X, installed as
# plugins/X.wasm (the test fixture follows the same rule). The guest SDKs are under guest/;
# plugins/ holds only what this Makefile builds.
RECIPES := $(notdir $(patsubst %/Cargo.toml,%,$(wildcard recipes/*/Cargo.toml)))
# The recipes also built in kazoo 2.11's wire format, installed as plugins/X-kazoo.wasm: the one
# rule is every recipe crate whose Cargo.toml declares a feature `kazoo` (a `kazoo = ` key in its
# [features]); host/cli/build.rs and the test fixture (tests/src/lib.rs, kazoo_recipes) derive
# their lists by the same rule, so a recipe joins all three by declaring the feature. They build
# into a target directory of their own: the same crate with other features writes the same output
# file, which a build of the other set would overwrite. (The election in LeaderSelector's format
# is one build of its own feature `selector`, named below, in build.rs and in the fixture.)
KAZOO_RECIPES := $(notdir $(patsubst %/Cargo.toml,%,$(shell awk '/^[ \t]*\[/ { features = ($$0 ~ /^[ \t]*\[features\][ \t]*(\#|$$)/) } features && /^[ \t]*"?kazoo"?[ \t]*=/ { print FILENAME }' recipes/*/Cargo.toml)))
KAZOO_GUEST_DIR := target/guests-kazoo/$(GUEST_TARGET)/release

.PHONY: publish-check setup recipes build demo test bench soak docs clean

setup:
	bash .ci/setup

recipes: setup
	$(CARGO) build --release --target $(GUEST_TARGET) --target-dir target/guests $(foreach r,$(RECIPES),-p wazoo-$(r))
	mkdir -p plugins
	$(foreach r,$(RECIPES),cp $(GUEST_DIR)/wazoo_$(r).wasm plugins/$(r).wasm;)
	$(if $(KAZOO_RECIPES),$(CARGO) build --release --target $(GUEST_TARGET) --target-dir target/guests-kazoo --features kazoo $(foreach r,$(KAZOO_RECIPES),-p wazoo-$(r)))
	$(foreach r,$(KAZOO_RECIPES),cp $(KAZOO_GUEST_DIR)/wazoo_$(r).wasm plugins/$(r)-kazoo.wasm;)
	# The election in Curator LeaderSelector's format (`wazoo elect --format selector`).
	$(CARGO) build --release --target $(GUEST_TARGET) --target-dir target/guests-selector --features selector -p wazoo-election
	cp target/guests-selector/$(GUEST_TARGET)/release/wazoo_election.wasm plugins/election-selector.wasm
	# The recipes in other languages: plugins/semaphore-py.wasm (componentize-py) and
	# plugins/election-js.wasm (componentize-js).
	bash guest/python/build.sh
	bash guest/js/build.sh
	# The recipes in C: plugins/barrier-c.wasm and plugins/lock-c.wasm (Debian's clang and
	# wasi-libc make a WASI core module; `wazoo componentize` makes it a component, so the binary
	# comes first).
	$(CARGO) build --release -p wazoo-cli
	bash guest/c/build.sh

build: recipes
	$(CARGO) build --release -p wazoo-cli
	./target/release/wazoo man --dir target/man

demo: build
	./target/release/wazoo recipes list
	./target/release/wazoo demo

test: build
	$(CARGO) test --release --no-fail-fast --workspace --exclude wazoo-guest --exclude wazoo-misbehave --exclude wazoo-baton $(foreach r,$(RECIPES),--exclude wazoo-$(r))
	$(CARGO) test --target x86_64-unknown-linux-gnu -p wazoo-guest -p wazoo-cache
	$(MAKE) publish-check

# The crates meant for crates.io (the daemon's contract and its Rust client) package and build
# as published; the others say why not (`publish = false` in their Cargo.toml).
# The dry run builds the packages it made in the dev profile, where cargo takes a registry
# package of the same name and version as built already: a proto changed since an earlier run
# would be verified against the old build. Nothing else here builds these two in the dev profile,
# so those builds go first. Cargo also unpacks the packaged wazoo-proto into CARGO_HOME's registry
# sources once and keeps that copy while its version stays the same: it goes too, so the client is
# verified against this proto.
publish-check:
	$(CARGO) clean --profile dev -p wazoo-proto -p wazoo-client
	rm -rf "$${CARGO_HOME:-$$HOME/.cargo}"/registry/src/*/wazoo-proto-*
	$(CARGO) publish --dry-run --allow-dirty -p wazoo-proto -p wazoo-client

bench: build
	bash .ci/setup-bench
	$(CARGO) bench -p wazoo-cli --bench lock
	$(CARGO) bench -p wazoo-cli --bench peers --features etcd
	$(CARGO) bench -p wazoo-cli --bench serve
	$(CARGO) bench -p wazoo-cli --bench languages
	$(CARGO) build --release --target $(GUEST_TARGET) --target-dir target/guests -p wazoo-misbehave
	$(CARGO) bench -p wazoo-cli --bench tenants
	$(CARGO) bench -p wazoo-cli --bench hostile
	$(CARGO) bench -p wazoo-cli --bench failover
	$(CARGO) bench -p wazoo-cli --bench rollout
	$(CARGO) bench -p wazoo-cli --bench swap
	$(CARGO) bench -p wazoo-cli --bench scale

# The chaos suite's randomised soak run: make soak SOAK="--seed 42 --minutes 30"
SOAK ?= --minutes 10
soak: build
	$(CARGO) run --release -p wazoo-tests --bin chaos-soak -- $(SOAK)

# The book under docs/ (mdBook), into target/book; `make test` builds it again and checks its
# links (tests/tests/docs.rs). Only mdBook is needed: `.ci/setup docs` installs it alone.
docs:
	bash .ci/setup docs
	mdbook build docs -d $(CURDIR)/target/book

clean:
	rm -rf target plugins/*.wasm
