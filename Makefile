# Handover: the two commands a new machine needs are `make drill` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help drill campaign test bench unit lint fmt venv build deploy clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

drill: ## A full local failover drill on emulated AWS (DRILL_DECISION=approve|reject|timeout|interactive|switchover|roundtrip)
	@scripts/drill.sh

campaign: ## The fault campaign: seeded incidents under injected faults, invariants checked (HANDOVER_CAMPAIGN_RUNS, _SEED, _REPLAY)
	@scripts/campaign.sh

test: ## Everything: set-up, fmt, clippy, validators, unit + emulator tests
	@scripts/test.sh

bench: ## What is measured so far: the report bench and the click -> PromoteReadReplica time (docs/explanation/performance.md)
	@scripts/bench.sh

# The one binary with unit tests is the CLI's; the others set test = false
# (--bins would build a harness for each anyway).
unit: ## Unit tests (--lib, and the CLI binary's): no emulator, no PostgreSQL
	cargo test --workspace --lib --bin handover

lint: venv ## fmt check, clippy -D warnings, ASL and template validation
	@scripts/lint.sh

build: ## sam build: every function for Lambda (arm64, provided.al2023) into infra/.aws-sam/build
	@scripts/build.sh

deploy: build ## sam deploy of the built artifacts (guided the first time); see docs/how-to/deploy.md
	cd infra && if [ -f samconfig.toml ]; then ../.venv/bin/sam deploy --template-file .aws-sam/build/template.yaml; \
	  else ../.venv/bin/sam deploy --guided --template-file .aws-sam/build/template.yaml; fi

fmt: ## Format the code
	cargo fmt --all

venv: ## Create .venv with the pinned Python tools (moto, cfn-lint, statelint, cargo-lambda)
	@scripts/venv.sh

clean: ## Remove build output, the venv and drill output
	rm -rf target .venv out
