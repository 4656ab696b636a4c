# seqlab tasks. `just --list` shows them all.

seqlab := "cargo run --release --locked -q -p runner --"

default:
    @just --list

# Run the whole test suite (what CI runs).
test:
    cargo test --workspace --locked

# Generate the toy datasets (English BIO, Chinese BMES) into datasets/.
toy:
    {{seqlab}} data toy --out datasets/toy-en --lang en
    {{seqlab}} data toy --out datasets/toy-zh --lang zh

# Describe a dataset folder: sizes, entities per type, OOV rates.
stats DATA="datasets/toy-en":
    {{seqlab}} data stats {{DATA}}

# Score a conlleval-format file (token … gold pred).
score FILE:
    {{seqlab}} score {{FILE}}
