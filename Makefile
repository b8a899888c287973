# Crossdock: the two commands a new machine needs are `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
BIN := target/release/crossdock

.PHONY: all setup build test demo bench clean

all: build

## setup: check and install what the build needs (Rust toolchain components)
setup:
	@scripts/setup.sh

## build: the release binary target/release/crossdock
build: setup
	$(CARGO) build --release --locked -p crossdock

## test: formatting, lints (warnings are errors) and every test; ends with a total line
test: setup
	@scripts/test.sh

## demo: start `crossdock standalone` and run a verified 1 GiB push-fetch through it
demo: build
	@scripts/demo.sh

## bench: the push-fetch benchmark at 4 GiB against raw loopback TCP in the same run
bench: build
	$(BIN) bench push-fetch --bytes 4GiB --baseline --runs 3 --json

clean:
	$(CARGO) clean
