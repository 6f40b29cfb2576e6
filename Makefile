# A thin wrapper over CMake and the scripts.  The two commands of the README:
#   make demo   install what is missing, build, show Probing on a live
#               training process
#   make test   install what is missing, build, run every test
BUILD ?= build
PYTHON ?= /usr/bin/python3
PREFIX ?= /usr/local
# make install: the Pythons to install the package into (default: every
# one the build has an agent for, build/pythons.txt)
PYTHONS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test test-freethreaded unit e2e dap-tests fuzz asan bench install clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeFiles/cmake.check_cache:
	cmake -S . -B $(BUILD) -DPython3_EXECUTABLE=$(PYTHON) >/dev/null

build: deps $(BUILD)/CMakeFiles/cmake.check_cache
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo $(BUILD)

test: deps
	@scripts/test-all $(BUILD)

# The agent on a free-threaded CPython 3.13t (built once in the trixie
# root: scripts/freethreaded says how).  Not part of `test`.
test-freethreaded:
	@scripts/freethreaded

unit: build
	cd $(BUILD) && ctest --output-on-failure

e2e: build
	PROBING_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q tests/e2e

bench: build
	PROBING_BUILD=$(abspath $(BUILD)) $(PYTHON) tests/bench/run.py

install: build
	scripts/install $(BUILD) $(PREFIX) $(PYTHONS)
	scripts/install-vscode $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
