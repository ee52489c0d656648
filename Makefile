# Front door. Every target first makes sure the Debian packages are there.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

# Compiles go through ccache (a Debian package), whose cache lives outside the
# checkout beside the kernel builds, so a fresh clone (CI's) rebuilds only what
# changed. CMake reads the launchers when it first configures a build folder,
# this one and fuzz/ci.sh's. Paths under the checkout are hashed relative to
# it (CCACHE_BASEDIR) and without the working folder (CCACHE_NOHASHDIR), so two
# clones share the cache; a hit's debug info names the first clone's folders.
# CCACHE_DISABLE=1 turns it off.
export CMAKE_C_COMPILER_LAUNCHER ?= ccache
export CMAKE_CXX_COMPILER_LAUNCHER ?= ccache
export CCACHE_DIR ?= $(or $(LEAPFROG_CACHE),/var/cache/leapfrog)/ccache
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
export CCACHE_MAXSIZE ?= 8G

.PHONY: deps configure build test bench demo deb clean format fuzz

deps:
	@bash deploy/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j 1
	@bash fuzz/ci.sh $(BUILD_DIR)-fuzz

bench: build
	@bash bench/run.sh $(BUILD_DIR)

# libFuzzer targets (fuzz/), in their own clang build with ASan and UBSan:
# FUZZ_RUNS executions each (default 10^7), or FUZZ_SECONDS seconds.
fuzz: deps
	@bash fuzz/run_all.sh $(BUILD_DIR)-fuzz

demo: build
	@bash deploy/demo.sh $(BUILD_DIR)

# The Debian package of the build (deploy/debian/build-deb.sh; docs/deploy.md).
deb: build
	@bash deploy/debian/build-deb.sh $(BUILD_DIR) dist

format:
	@clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	@rm -rf $(BUILD_DIR)
