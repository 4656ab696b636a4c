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

# The QA comparison (experiments/qa.md): qa-cross and qa-concat-self
# × seeds 1–5 (paired), qa-concat-self-deep and qa-bilstm × seeds 1–3, two runs
# side by side at one thread each (runs in experiments/runs/qa/); then the
# question-shuffle ablation of every run, the baselines, the attention share of
# the concatenating runs, attention pictures of a dev question (context →
# question) for cross and concat, and seqlab compare (bootstrap intervals of every pair).
qa-experiments DATA=squad: (_qa DATA)
    for s in 1 2 3 4 5; do {{seqlab}} train --config experiments/configs/qa-cross.toml --data {{DATA}} --seed $s --threads 1 --out experiments/runs/qa/qa-cross-s$s --quiet & {{seqlab}} train --config experiments/configs/qa-concat-self.toml --data {{DATA}} --seed $s --threads 1 --out experiments/runs/qa/qa-concat-self-s$s --quiet & wait; done
    for s in 1 2 3; do {{seqlab}} train --config experiments/configs/qa-concat-self-deep.toml --data {{DATA}} --seed $s --threads 1 --out experiments/runs/qa/qa-concat-self-deep-s$s --quiet & {{seqlab}} train --config experiments/configs/qa-bilstm.toml --data {{DATA}} --seed $s --threads 1 --out experiments/runs/qa/qa-bilstm-s$s --quiet & wait; done
    for r in experiments/runs/qa/*/; do {{seqlab}} eval --run $r --split test --shuffle-questions --json > $r/shuffled.test.json; done
    mkdir -p experiments/qa
    {{seqlab}} qa baseline --data {{DATA}} --split test --out experiments/qa/baselines.json
    for r in experiments/runs/qa/qa-concat-self-s1 experiments/runs/qa/qa-concat-self-deep-s1; do {{seqlab}} qa attention --run $r --split dev; done
    for r in qa-cross-s1 qa-concat-self-s1; do {{seqlab}} visualize --run experiments/runs/qa/$r --split dev --sentence 0 --out experiments/qa/pictures/$r; done
    {{seqlab}} compare experiments/runs/qa/* --out experiments/qa

# Cross-attention at its best (experiments/qa.md): each reader in CONFIGS
# (by default BiDAF's attention flow, DCN's co-attention and their
# concatenation match, the 3-layer BiLSTM reader over question [SEP] context;
# add qa-cross and qa-concat-self for the one-way pair) × SEEDS on DATA (the
# SQuAD split, or datasets/cmrc-split for CMRC 2018), for example
#   just qa-fusion-experiments datasets/cmrc-split "1 2 3" "qa-bidaf qa-coattention qa-bilstm qa-cross qa-concat-self"
# Two runs side by side at one thread each, in experiments/runs/qa-fusion/NAME/
# (NAME the data folder's name; finished runs are kept); then the
# question-shuffle ablation of each run and seqlab compare (paired bootstrap
# intervals) into experiments/qa/fusion-NAME/.
qa-fusion-experiments DATA=squad SEEDS="1 2 3 4 5" CONFIGS="qa-bidaf qa-coattention qa-bilstm": (_qa DATA) && (_qa-fusion-compare DATA)
    for s in {{SEEDS}}; do for c in {{CONFIGS}}; do echo "$c $s"; done; done | xargs -P 2 -L 1 sh -c 'o=experiments/runs/qa-fusion/$(basename {{DATA}})/$0-s$1; [ -f $o/summary.json ] || {{seqlab}} train --config experiments/configs/$0.toml --data {{DATA}} --seed $1 --threads 1 --out $o --quiet'

# The input cues' ablation (experiments/qa.md): CONFIGS × SEEDS on DATA with
# the reading cues, DrQA's exact match and its aligned question embedding off
# (cue_dim = aligned_dim = question_match_dim = 0), named CONFIG-nocues (runs CONFIG-nocues-sS beside
# the runs of qa-fusion-experiments); then the shuffle ablation and compare.
qa-cue-ablation DATA=squad SEEDS="1 2 3" CONFIGS="qa-bidaf qa-bilstm": (_qa DATA) && (_qa-fusion-compare DATA)
    for s in {{SEEDS}}; do for c in {{CONFIGS}}; do echo "$c $s"; done; done | xargs -P 2 -L 1 sh -c 'o=experiments/runs/qa-fusion/$(basename {{DATA}})/$0-nocues-s$1; [ -f $o/summary.json ] || {{seqlab}} train --config experiments/configs/$0.toml --data {{DATA}} --seed $1 --threads 1 --out $o --quiet --set model.features.cue_dim=0 --set model.features.aligned_dim=0 --set model.features.question_match_dim=0 --set name=$0-nocues'

_qa-fusion-compare DATA:
    for r in experiments/runs/qa-fusion/$(basename {{DATA}})/*/; do [ -s $r/shuffled.test.json ] || {{seqlab}} eval --run $r --split test --shuffle-questions --json > $r/shuffled.test.json; done
    {{seqlab}} compare experiments/runs/qa-fusion/$(basename {{DATA}})/* --out experiments/qa/fusion-$(basename {{DATA}})

# Which position bias (experiments/positions.md): attention-relative-crf.toml
# changed in its position only, each of POSITIONS × SEEDS on DATA, named
# NAME-POSITION, two runs side by side at one thread each, in
# experiments/runs/positions/NAME/ (finished runs are kept), for example
#   just position-experiments ../shared/datasets/resume-ner resume "1 2 3"
# Train the position biases side by side, then seqlab compare into experiments/positions/NAME/.
position-experiments DATA NAME SEEDS="1 2 3" POSITIONS="relative rope alibi t5 sinusoidal learned": (_data DATA) (_position-runs DATA NAME SEEDS POSITIONS "")
    {{seqlab}} compare $(for p in {{POSITIONS}}; do ls -d experiments/runs/positions/{{NAME}}/{{NAME}}-$p-s*; done) --out experiments/positions/{{NAME}}

# Length extrapolation (experiments/positions.md): the same taggers trained on
# windows of at most 64 tokens (data.max_len = 64; named NAME-POSITION-len64),
# then scored on the whole test sentences and on the test set joined into
# passages of at most 512 tokens (seqlab data concat, in datasets/NAME-concat512/).
# Each run gets whole.test.json and concat512.test.json.
position-extrapolation DATA NAME SEEDS="1" POSITIONS="relative rope alibi t5 sinusoidal learned": (_data DATA) (_position-runs DATA NAME SEEDS POSITIONS "-len64" "--set data.max_len=64")
    mkdir -p datasets/{{NAME}}-concat512
    for f in {{DATA}}/*; do case $(basename $f) in test*) {{seqlab}} data concat $f --max-len 512 --out datasets/{{NAME}}-concat512/$(basename $f);; README*) ;; *) cp $f datasets/{{NAME}}-concat512/;; esac; done
    for r in experiments/runs/positions/{{NAME}}/{{NAME}}-*-len64-s*/; do {{seqlab}} eval --run $r --split test --max-len 0 --json > $r/whole.test.json && {{seqlab}} eval --run $r --data datasets/{{NAME}}-concat512 --split test --max-len 0 --json > $r/concat512.test.json; done

# attention-relative-crf.toml with each position in POSITIONS × SEEDS on DATA,
# named NAME-POSITION{SUFFIX}, with the extra --set options SETS; two runs
# side by side at one thread each; finished runs are kept.
_position-runs DATA NAME SEEDS POSITIONS SUFFIX *SETS:
    for s in {{SEEDS}}; do for p in {{POSITIONS}}; do echo "$p $s"; done; done | xargs -P 2 -L 1 sh -c 'o=experiments/runs/positions/{{NAME}}/{{NAME}}-$0{{SUFFIX}}-s$1; [ -f $o/summary.json ] || {{seqlab}} train --config experiments/configs/attention-relative-crf.toml --data {{DATA}} --seed $1 --threads 1 --out $o --quiet --set model.encoder.attention.position=$0 --set name={{NAME}}-$0{{SUFFIX}} {{SETS}}'

# Is attention an explanation? (experiments/explain.md) seqlab explain on a
# trained run's test split, into experiments/explain/NAME/.
explain RUN NAME ITEMS="500" *ARGS:
    {{seqlab}} --threads 1 explain --run {{RUN}} --split test --items {{ITEMS}} --max-k 10 --out experiments/explain/{{NAME}} {{ARGS}}

# Head-count sweep: the attention-CRF (attention-crf.toml) at d_model D_MODEL
# for every heads count in HEADS × attention dropout in DROPOUTS × training-set
# size in SIZES (sentences, a subset fixed by the seed; 0 = all) × seed in
# SEEDS, to convergence (early stopping); then one set of attention pictures per
# setting (seed 1, test sentence $SENTENCE, default 0, focus on token $FOCUS,
# default the first) under experiments/heads-sweep{NAME}/, and the table in OUT.
# Runs go to experiments/runs/heads-sweep/d{D_MODEL}{NAME}/; NAME keeps
# another dataset's sweep apart. The issue-25 grids (little data):
#   just sweep-heads ../shared/datasets/resume-ner 512 "8 4 2" "0 0.1" "300 1000 0"
#   just sweep-heads ../shared/datasets/conll2003 512 "8 4 2" "0 0.1" 1000 "1 2 3" experiments/heads-sweep-conll-d512.md -conll
sweep-heads DATA=toy D_MODEL="256" HEADS="1 2 4 8" DROPOUTS="0.1" SIZES="0" SEEDS="1 2 3" OUT="experiments/heads-sweep.md" NAME="" *ARGS: (_data DATA)
    for n in {{SIZES}}; do for h in {{HEADS}}; do for d in {{DROPOUTS}}; do for s in {{SEEDS}}; do {{seqlab}} train --config experiments/configs/attention-crf.toml --data {{DATA}} --seed $s --set data.train_sentences=$n --set model.encoder.attention.d_model={{D_MODEL}} --set model.encoder.attention.heads=$h --set model.encoder.attention.attention_dropout=$d --out experiments/runs/heads-sweep/d{{D_MODEL}}{{NAME}}/n$n-h$h-d$d-s$s --quiet {{ARGS}}; done; done; done; done
    for n in {{SIZES}}; do for h in {{HEADS}}; do for d in {{DROPOUTS}}; do l=$([ $n = 0 ] && echo all || echo $n); {{seqlab}} visualize --run experiments/runs/heads-sweep/d{{D_MODEL}}{{NAME}}/n$n-h$h-d$d-s1 --sentence {{env_var_or_default("SENTENCE", "0")}} --focus {{env_var_or_default("FOCUS", "0")}} --out experiments/heads-sweep{{NAME}}/n$l-h$h-d$d; done; done; done
    {{seqlab}} heads-sweep $(for n in {{SIZES}}; do for h in {{HEADS}}; do for d in {{DROPOUTS}}; do for s in {{SEEDS}}; do echo experiments/runs/heads-sweep/d{{D_MODEL}}{{NAME}}/n$n-h$h-d$d-s$s; done; done; done; done) --pictures experiments/heads-sweep{{NAME}} --out {{OUT}}

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
