# The two set-up commands of the README: `make run` and `make test`.
# Both use Postgres and Redis at DATABASE_URL / REDIS_URL when set, else the
# ones on the default local ports, else private instances under .dev/
# (installed with apt-get when missing).

SERVICES = eval "$$(./docker/dev-services.sh)"

.PHONY: run test lint openapi bench services compose-test

run:
	@$(SERVICES) && cargo build --release --bins && ./docker/run-all.sh

test:
	@$(SERVICES) && ./docker/test.sh

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

openapi:
	cargo run -q -p scanfleet-api -- openapi > openapi/openapi.json

services:
	@./docker/dev-services.sh

# The compose stack for real (root and a running dockerd; not part of `test`).
compose-test:
	./docker/compose-test.sh
