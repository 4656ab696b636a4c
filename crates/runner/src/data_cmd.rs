//! `seqlab data toy` and `seqlab data stats`.

use crate::cli::{StatsArgs, ToyArgs};
use corpus::Dataset;

pub fn toy(args: &ToyArgs) -> anyhow::Result<()> {
    if args.sentences == 0 {
        anyhow::bail!("--sentences must be at least 1");
    }
    corpus::toy::write_dataset(&args.out, args.lang, args.sentences, args.seed)?;
    println!(
        "wrote {} ({} training sentences, language {}, seed {})",
        args.out.display(),
        args.sentences,
        args.lang,
        args.seed
    );
    Ok(())
}

pub fn stats(args: &StatsArgs) -> anyhow::Result<()> {
    let ds = Dataset::load(&args.dir)?;
    let stats = corpus::stats::stats(&ds);
    if args.json {
        println!("{}", serde_json::to_string(&stats)?);
    } else {
        print!("{}", stats.table());
        for (split, label) in ds.unseen_labels() {
            println!("note: type {label} occurs in {} but not in train", split.as_str());
        }
    }
    Ok(())
}
