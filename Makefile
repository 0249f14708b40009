# Handover: the two commands a new machine needs are `make drill` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help test unit lint fmt venv build deploy clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

test: ## Everything: set-up, fmt, clippy, validators, unit + emulator tests
	@scripts/test.sh

unit: ## Unit tests only (no emulator)
	cargo test --workspace --lib --bins

lint: venv ## fmt check, clippy -D warnings, ASL and template validation
	@scripts/lint.sh

fmt: ## Format the code
	cargo fmt --all

venv: ## Create .venv with the pinned Python tools (moto, cfn-lint, statelint, cargo-lambda)
	@scripts/venv.sh

clean: ## Remove build output, the venv and drill output
	rm -rf target .venv out
