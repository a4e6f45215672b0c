# calibprob — every command does its own set-up (virtual environment + install) on a fresh machine.
#   make run        the main job: quickstart comparison on bundled data
#   make test       the default test suite (what CI runs; installs Debian's chromium as root if missing)
#   make test-fast  the package's unit tests in parallel, about 1 min on 2 idle cores (no docs, notebooks, CLI, runner, lint)
#   make test-slow  the long statistical tests (they assert too; not in CI's default run)
#   make test-seeds the seed sweep: every @pytest.mark.seeded test at seeds 0..SEEDS-1 (default 20), with a summary
#   make docs       build the documentation (warnings are errors, nitpicky, every public name listed)
#   make bench      print the benchmark ratios
#   make coverage   the default test suite under coverage: a terminal summary and coverage-html/

SHELL := /bin/bash
VENV ?= .venv
# .python-version selects 3.12 under pyenv; otherwise any python3.12 on PATH.
PYTHON ?= $(shell command -v python3.12 2>/dev/null || command -v python3 2>/dev/null)
STAMP := $(VENV)/.calibprob-installed
BIN := $(VENV)/bin
# One BLAS thread per process: the GP code parallelises over tasks (Dask workers),
# and nested BLAS threads on a shared 2-core machine only oversubscribe.
export OPENBLAS_NUM_THREADS ?= 1
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
# The default suite runs on pytest-xdist workers: one per core (auto), work-stealing because test
# durations range from milliseconds to minutes. TEST_WORKERS=0 runs it serially in one process.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) --dist worksteal
# make test-fast: the unit tests of the contract, metrics, data sets, core, calibrators and the NumPy/GP
# bases, spec and ranking; not the tests that run whole things (Sphinx, notebooks, lint and mypy, the CLI,
# runner and faults in subprocesses, PyMC/bambi sampling, GP-Beta, paper-table rows, saved-file replays).
FAST_TESTS := tests/predictive tests/metrics tests/datasets tests/_core tests/calibrators/test_recalibration.py \
  tests/calibrators/online tests/calibrators/conformal tests/bases/test_linear.py tests/bases/test_linear_numerics.py \
  tests/bases/test_transforms.py tests/bases/gp tests/compare/test_spec.py tests/compare/test_spec_values.py \
  tests/compare/test_ranking.py tests/compare/test_ranking_groups.py \
  --ignore=tests/_core/test_io.py --ignore=tests/_core/test_saved_files.py --ignore=tests/predictive/test_pymc_workflow.py \
  --ignore=tests/calibrators/conformal/test_gp.py --ignore=tests/calibrators/conformal/test_from_bambi.py \
  --ignore=tests/calibrators/conformal/test_from_pymc.py --ignore=tests/calibrators/conformal/test_loo_jackknife_pymc.py

.PHONY: run test test-fast test-slow test-seeds test-all docs bench clean venv browser coverage

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "calibprob needs Python >= 3.12 (PyMC 6); found " + sys.version.split()[0] + ". Install 3.12 or set PYTHON=/path/to/python3.12")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# constraints.txt: the versions the suite was last green with (CONTRIBUTING.md says how to move them).
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	@# Compile once per machine, not on the first run: every PyTensor graph the quickstart
	@# compiles goes into PyTensor's disk cache now (today it compiles none: the GP, GP-Beta's
	@# MAP/ADVI and the sharp GP run NumPy or FAST_COMPILE graphs; specs with NUTS or PyMC bases do).
	$(BIN)/python -m calibprob._core.warm models/quickstart.toml || echo "calibprob: cache warming failed (not fatal: the first run compiles instead)"
	@touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/calibprob compare models/quickstart.toml --out results/quickstart.nc

# The HTML-report test renders the page in Debian's chromium. Installed here when missing and
# running as root with apt-get (as CI does; about 1-2 min once, a no-op afterwards); otherwise,
# or if the install fails, that one test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the HTML-report test"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	      || echo "warning: chromium could not be installed; the HTML-report browser test will skip"; \
	  else echo "note: chromium is not installed (needs root and apt-get); the HTML-report browser test will skip"; fi; }

test: $(STAMP) browser
	$(BIN)/python -m pytest $(XDIST) --durations=15

test-fast: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) $(FAST_TESTS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

# The seed sweep (tests/conftest.py): each seeded test's assertions at seeds 0..SEEDS-1, then the range of every
# statistic the tests record (tests/support/sweep_summary.py). SEED_TESTS narrows it to some files, e.g.
# make test-seeds SEEDS=5 SEED_TESTS=tests/bases/test_pymc_linear.py
SEEDS ?= 20
SEED_TESTS ?=
test-seeds: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) -m "seeded and slow" --seed-sweep=$(SEEDS) -o junit_family=xunit1 --junitxml=seed-sweep.xml $(SEED_TESTS); \
	  status=$$?; $(BIN)/python -m tests.support.sweep_summary seed-sweep.xml; exit $$status

test-all: $(STAMP)
	$(BIN)/python -m pytest -m "slow or not slow"

# Line coverage of calibprob/ by the default suite (what CI runs). Code run in subprocesses (the CLI tests,
# Dask workers) is not counted, so the figure is a lower bound; docs/contributing.md gives the last one.
coverage: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) --cov=calibprob --cov-report=term:skip-covered --cov-report=html:coverage-html

# The autosummary stubs are regenerated each time: a stub left from a name since removed would be built too.
docs: $(STAMP)
	rm -rf docs/api/generated
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html

bench: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) docs/_build results .pytest_cache coverage-html .coverage seed-sweep.xml
