# seqlab tasks. `just --list` shows them all; DATA defaults to the generated
# toy dataset, written on first use.

seqlab := "cargo run --release --locked -q -p runner --"
toy := "datasets/toy-en"
squad := "datasets/squad-split"
cmrc := "datasets/cmrc-split"

default:
    @just --list

# Run the whole test suite (what CI runs).
test:
    cargo test --workspace --locked

# The GPU path's suite (CI runs it after `test`, three processes side by side):
# every operation and three reference models on burn-wgpu against the CPU.
# `test` builds it and lists it as ignored: it needs a Vulkan, Metal or DX12
# device; on a machine without a GPU, Mesa's software Vulkan driver
# (`apt-get install mesa-vulkan-drivers`) runs it, slowly (about 50 minutes on 2 cores; CI runs it in three parts side by side, 34).
test-wgpu:
    XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)} cargo test --workspace --locked --test wgpu_parity --test wgpu_train -- --ignored --nocapture

# CI runs it after `test`: .ci/slurm installs slurm-wlm and munge when missing
# and starts them (root), a 4-run toy grid runs as a job array, and the daemons
# are stopped.
# seqlab sweep --on slurm on a single-node Slurm on localhost.
test-slurm:
    .ci/slurm start
    cargo test --workspace --locked --test sweep_e2e -- --ignored; rc=$?; .ci/slurm stop; exit $rc

# Fuzz the readers (column, score, vectors, vocab, dataset.toml) and the config
# parser for SECONDS each (two targets at a time); each prints how many inputs it tried.
fuzz SECONDS="600":
    SEQLAB_FUZZ_SECONDS={{SECONDS}} cargo test --locked -p corpus --test fuzz -- --nocapture --test-threads 2 fuzz_
    SEQLAB_FUZZ_SECONDS={{SECONDS}} cargo test --locked -p runner --lib -- --nocapture fuzz_config

# Train a BiLSTM-CRF (words, char CNN with character dropout, bigrams on Chinese data, weight averaging) on DATA.
train-bilstm DATA=toy *ARGS: (_data DATA)
    {{seqlab}} train --config experiments/configs/bilstm-crf.toml --data {{DATA}} {{ARGS}}

# Train a self-attention-CRF (sinusoidal positions) on DATA.
train-attention DATA=toy *ARGS: (_data DATA)
    {{seqlab}} train --config experiments/configs/attention-crf.toml --data {{DATA}} {{ARGS}}

# Train a self-attention-CRF with TENER's relative positions (bigrams on Chinese data, weight averaging) on DATA.
train-attention-relative DATA=toy *ARGS: (_data DATA)
    {{seqlab}} train --config experiments/configs/attention-relative-crf.toml --data {{DATA}} {{ARGS}}

# TENER's sizes and SGD schedule for Resume NER (train_tener_cn.py; tener-resume.toml says where seqlab differs) on DATA.
train-tener DATA=toy *ARGS: (_data DATA)
    {{seqlab}} train --config experiments/configs/tener-resume.toml --data {{DATA}} {{ARGS}}

# Extractive QA (SQuAD v1.1) as tagging. DATA is a folder with SQuAD-format
# train.json/dev.json (test.json) and a tokenizer.json; the default is the
# official dev file split by article (34 train / 4 dev / 10 test), made on first use.
# Self-attention over question [SEP] context.
train-qa-self DATA=squad *ARGS: (_qa DATA)
    {{seqlab}} train --config experiments/configs/qa-concat-self.toml --data {{DATA}} {{ARGS}}

# Context self-attention + cross-attention to the question.
train-qa-cross DATA=squad *ARGS: (_qa DATA)
    {{seqlab}} train --config experiments/configs/qa-cross.toml --data {{DATA}} {{ARGS}}

# Self-attention over question [SEP] context, one block deeper (matched parameters).
train-qa-self-deep DATA=squad *ARGS: (_qa DATA)
    {{seqlab}} train --config experiments/configs/qa-concat-self-deep.toml --data {{DATA}} {{ARGS}}

# BiLSTM over question [SEP] context.
train-qa-bilstm DATA=squad *ARGS: (_qa DATA)
    {{seqlab}} train --config experiments/configs/qa-bilstm.toml --data {{DATA}} {{ARGS}}

# BiDAF: BiLSTM encoders, attention flow (context to query and query to context), modelling BiLSTM.
train-qa-bidaf DATA=squad *ARGS: (_qa DATA)
    {{seqlab}} train --config experiments/configs/qa-bidaf.toml --data {{DATA}} {{ARGS}}

# DCN's co-attention between BiLSTM encoders, then the fusion BiLSTM.
train-qa-coattention DATA=squad *ARGS: (_qa DATA)
    {{seqlab}} train --config experiments/configs/qa-coattention.toml --data {{DATA}} {{ARGS}}

# No-learning baselines (sliding window, best sentence, nearest words, random
# span) on DATA's test split, scored with its metric.
qa-baseline DATA=squad: (_qa DATA)
    {{seqlab}} qa baseline --data {{DATA}} --split test

# Every published grid of runs is a file of experiments/grids/ (docs/sweeps.md;
# finished runs are skipped, interrupted ones resumed), for example
#   just sweep positions-resume
#   just sweep qa-fusion-squad --on slurm --partition cpu --time 2:00:00
# Train the grid experiments/grids/GRID.toml: on this machine, or --on slurm as a job array.
sweep GRID *ARGS:
    {{seqlab}} sweep experiments/grids/{{GRID}}.toml {{ARGS}}

# The QA comparison (experiments/qa.md): the grid experiments/grids/qa.toml
# (qa-cross and qa-concat-self × seeds 1–5, qa-concat-self-deep and qa-bilstm
# × seeds 1–3, runs in experiments/runs/qa/); then the question-shuffle
# ablation of every run, the baselines, the attention share of the
# concatenating runs, attention pictures of a dev question (context →
# question) for cross and concat, and seqlab compare (bootstrap intervals of every pair).
qa-experiments: (_qa squad)
    {{seqlab}} sweep experiments/grids/qa.toml
    for r in experiments/runs/qa/*/; do [ -f $r/summary.json ] && {{seqlab}} eval --run $r --split test --shuffle-questions --json > $r/shuffled.test.json; done
    mkdir -p experiments/qa
    {{seqlab}} qa baseline --data {{squad}} --split test --out experiments/qa/baselines.json
    for r in experiments/runs/qa/qa-concat-self-s1 experiments/runs/qa/qa-concat-self-deep-s1; do {{seqlab}} qa attention --run $r --split dev; done
    for r in qa-cross-s1 qa-concat-self-s1; do {{seqlab}} visualize --run experiments/runs/qa/$r --split dev --sentence 0 --out experiments/qa/pictures/$r; done
    {{seqlab}} compare experiments/runs/qa --out experiments/qa

# Cross-attention at its best (experiments/qa.md): on the SQuAD split
# (DATA=squad, the grid qa-fusion-squad.toml: BiDAF's attention flow, DCN's
# co-attention and their concatenation match, the 3-layer BiLSTM reader over
# question [SEP] context, seeds 1–5) or on CMRC 2018 (DATA=datasets/cmrc-split,
# qa-fusion-cmrc.toml: the same and the one-way Transformer pair, seeds 1–3),
# runs in experiments/runs/qa-fusion/NAME/ (NAME the data folder's name); then
# the question-shuffle ablation of each run and seqlab compare (paired
# bootstrap intervals) into experiments/qa/fusion-NAME/.
qa-fusion-experiments DATA=squad: (_qa DATA) && (_qa-fusion-compare DATA)
    {{seqlab}} sweep experiments/grids/qa-fusion-$(basename {{DATA}} -split).toml

# The input cues' ablation (experiments/qa.md): the grid qa-cues.toml, BiDAF
# and the BiLSTM concat reader × seeds 1–3 with the reading cues, DrQA's exact
# match and its aligned question embedding off (cue_dim = aligned_dim =
# question_match_dim = 0), runs CONFIG-nocues-sS beside the runs of
# qa-fusion-experiments; then the shuffle ablation and compare.
qa-cue-ablation: (_qa squad) && (_qa-fusion-compare squad)
    {{seqlab}} sweep experiments/grids/qa-cues.toml

_qa-fusion-compare DATA:
    for r in experiments/runs/qa-fusion/$(basename {{DATA}})/*/; do [ ! -f $r/summary.json ] || [ -s $r/shuffled.test.json ] || {{seqlab}} eval --run $r --split test --shuffle-questions --json > $r/shuffled.test.json; done
    {{seqlab}} compare experiments/runs/qa-fusion/$(basename {{DATA}}) --out experiments/qa/fusion-$(basename {{DATA}})

# Which position bias (experiments/positions.md): the grid
# experiments/grids/positions-NAME.toml (attention-relative-crf.toml changed in
# its position only, each position × seeds 1–3; NAME resume or conll), runs in
# experiments/runs/positions/NAME/, seqlab compare into experiments/positions/NAME/.
# Which position bias: the grid positions-NAME.toml (NAME resume or conll).
position-experiments NAME:
    {{seqlab}} sweep experiments/grids/positions-{{NAME}}.toml

# Length extrapolation (experiments/positions.md): the grid
# positions-NAME-len64.toml (the same taggers trained on windows of at most 64
# tokens, data.max_len = 64; runs NAME-POSITION-len64-sS), then each scored on
# the whole test sentences of DATA and on its test set joined into passages of
# at most 512 tokens (seqlab data concat, in datasets/NAME-concat512/).
# Each run gets whole.test.json and concat512.test.json.
# Length extrapolation: train on 64-token windows, test on whole sentences and 512-token passages.
position-extrapolation NAME="resume" DATA="../shared/datasets/resume-ner":
    {{seqlab}} sweep experiments/grids/positions-{{NAME}}-len64.toml
    mkdir -p datasets/{{NAME}}-concat512
    for f in {{DATA}}/*; do case $(basename $f) in test*) {{seqlab}} data concat $f --max-len 512 --out datasets/{{NAME}}-concat512/$(basename $f);; README*) ;; *) cp $f datasets/{{NAME}}-concat512/;; esac; done
    for r in experiments/runs/positions/{{NAME}}/{{NAME}}-*-len64-s*/; do {{seqlab}} eval --run $r --split test --max-len 0 --json > $r/whole.test.json && {{seqlab}} eval --run $r --data datasets/{{NAME}}-concat512 --split test --max-len 0 --json > $r/concat512.test.json; done

# Is attention an explanation? (experiments/explain.md) seqlab explain on a
# trained run's test split, into experiments/explain/NAME/.
explain RUN NAME ITEMS="500" *ARGS:
    {{seqlab}} --threads 1 explain --run {{RUN}} --split test --items {{ITEMS}} --max-k 10 --out experiments/explain/{{NAME}} {{ARGS}}

# Head-count sweep: the grid experiments/grids/heads-GRID.toml (the
# attention-CRF, attention-crf.toml, at one d_model with each heads count ×
# attention dropout × training-set size × seed, to convergence; runs in
# experiments/runs/heads-sweep/GRID/); then one set of attention pictures per
# setting (seed 1, test sentence $SENTENCE, default 0, focus on token $FOCUS,
# default the first) under PICTURES/, and the table in OUT. The published grids:
#   SENTENCE=27 FOCUS=0 just sweep-heads resume-d512 experiments/heads-sweep experiments/heads-sweep-d512.md
#   SENTENCE=13 FOCUS=0 just sweep-heads conll-d512 experiments/heads-sweep-conll experiments/heads-sweep-conll-d512.md
#   SENTENCE=27 just sweep-heads resume-d256 experiments/heads-sweep experiments/heads-sweep.md
# Head-count sweep of experiments/grids/heads-GRID.toml, its pictures and its table.
sweep-heads GRID PICTURES OUT:
    {{seqlab}} sweep experiments/grids/heads-{{GRID}}.toml
    for r in experiments/runs/heads-sweep/{{GRID}}/*-s1/; do n=$(basename $r); {{seqlab}} visualize --run $r --sentence {{env_var_or_default("SENTENCE", "0")}} --focus {{env_var_or_default("FOCUS", "0")}} --out {{PICTURES}}/${n%-s1}; done
    {{seqlab}} heads-sweep experiments/runs/heads-sweep/{{GRID}} --pictures {{PICTURES}} --out {{OUT}}

# Compare every run under experiments/runs (writes experiments/comparison.{md,csv}, dev-f1.svg).
compare *RUNS:
    {{seqlab}} compare {{RUNS}}

# Generate the toy datasets (English BIO, Chinese BMES) into datasets/.
toy:
    {{seqlab}} data toy --out datasets/toy-en --lang en
    {{seqlab}} data toy --out datasets/toy-zh --lang zh

# Describe a dataset folder: sizes, entities per type, OOV rates.
stats DATA=toy: (_data DATA)
    {{seqlab}} data stats {{DATA}}

# Score a conlleval-format file (token … gold pred).
score FILE:
    {{seqlab}} score {{FILE}}

# CRF throughput (NLL forward+backward, Viterbi).
bench-crf *ARGS:
    {{seqlab}} bench crf {{ARGS}}

# Add --train for forward+backward; each cell runs in a fresh process.
# Self-attention peak memory and time per implementation and length, with a log-log plot.
bench-attention *ARGS:
    {{seqlab}} bench attention --plot experiments/bench/attention-memory.svg {{ARGS}}

# Training-step memory of a config: the planner's estimate against the measured peak.
bench-memory CONFIG="experiments/configs/attention-crf.toml" *ARGS:
    {{seqlab}} bench memory --config {{CONFIG}} {{ARGS}}

# DATA: a dataset folder whose training split is batched (default: generated
# sentences with CoNLL-2003-like lengths).
# Training and inference tokens/s of the reference taggers (benchmarks/configs).
bench-throughput DATA="" *ARGS:
    for c in ref-bilstm-crf ref-attention-crf; do for w in train predict; do {{seqlab}} bench $w --config benchmarks/configs/$c.toml {{ if DATA == "" { "" } else { "--data " + DATA } }} {{ARGS}}; done; done

# The PyTorch reference lives in benchmarks/pytorch (its own venv, made on
# first use); both run the same batches at the same threads, ROUNDS rounds
# in rotating order, PyTorch with OpenMP's default wait policy and with
# PASSIVE (the ratio is against the faster), and for predict also as
# single-threaded workers. DATA: a dataset folder (default: generated sentences).
# seqlab against PyTorch, side by side: writes benchmarks/results.md.
bench-vs-pytorch DATA="" ROUNDS="5" THREADS="2":
    cargo build --release --locked -p runner
    DATA="{{DATA}}" ROUNDS={{ROUNDS}} THREADS={{THREADS}} benchmarks/vs-pytorch.sh

# Each position bias's tokens/s (train and predict) on DATA's training
# batches, in rotating order (experiments/positions.md).
bench-positions DATA="../shared/datasets/resume-ner" ROUNDS="3" THREADS="1":
    cargo build --release --locked -p runner
    ROUNDS={{ROUNDS}} THREADS={{THREADS}} benchmarks/positions.sh target/release/seqlab {{DATA}}

# Every benchmark with its defaults.
bench: bench-crf bench-attention bench-memory bench-throughput

# Generate the toy dataset when DATA is the default and missing.
_data DATA:
    @if [ "{{DATA}}" = "{{toy}}" ] && [ ! -e "{{toy}}/dataset.toml" ]; then {{seqlab}} data toy --out {{toy}}; fi

# Split the shared SQuAD v1.1 dev file (train/dev/test by article) and train a
# tokenizer when DATA is the default and missing; a split from before test.json
# existed is redone, and its tokenizer with it. DATA=datasets/cmrc-split does the
# same for the CMRC 2018 dev file (668 / 60 / 120 articles). The tokenizer is the
# one the published runs used (experiments/qa/tokenizers/, where there is one):
# the tokenizers crate's WordPiece trainer breaks ties in hash-map order, so a
# tokenizer trained again differs a little.
_qa DATA:
    @if [ "{{DATA}}" = "{{squad}}" ] && [ ! -e "{{squad}}/test.json" ]; then {{seqlab}} data split-qa ../shared/datasets/squad11/dev-v1.1.json --held-out 10 --dev 4 --out {{squad}} && rm -f {{squad}}/tokenizer.json; fi
    @if [ "{{DATA}}" = "{{cmrc}}" ] && [ ! -e "{{cmrc}}/test.json" ]; then {{seqlab}} data split-qa ../shared/datasets/cmrc2018/dev.json --held-out 120 --dev 60 --out {{cmrc}} && rm -f {{cmrc}}/tokenizer.json; fi
    @if [ ! -e "{{DATA}}/tokenizer.json" ] && [ -e "experiments/qa/tokenizers/$(basename {{DATA}}).json" ]; then cp "experiments/qa/tokenizers/$(basename {{DATA}}).json" {{DATA}}/tokenizer.json; fi
    @if [ ! -e "{{DATA}}/tokenizer.json" ]; then {{seqlab}} tokenizer train --data {{DATA}} --vocab-size 16000 --out {{DATA}}/tokenizer.json; fi
