//! `seqlab data toy`, `seqlab data stats`, `seqlab data split-qa` and
//! `seqlab tokenizer train`.

use crate::cli::{SplitQaArgs, StatsArgs, TokenizerTrainArgs, ToyArgs};
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

pub fn split_qa(args: &SplitQaArgs) -> anyhow::Result<()> {
    let file = corpus::squad::SquadFile::read(&args.file)?;
    let n = file.data.len();
    if args.held_out == 0 || args.held_out >= n {
        anyhow::bail!("--held-out must be between 1 and {} (the file has {n} articles)", n.saturating_sub(1));
    }
    let (train, dev) = file.split_by_article(args.held_out);
    std::fs::create_dir_all(&args.out)?;
    for (name, part) in [("train.json", &train), ("dev.json", &dev)] {
        part.write(&args.out.join(name))?;
        let s = part.stats();
        println!(
            "{}: {} articles, {} paragraphs, {} questions, {} answers",
            args.out.join(name).display(),
            s.articles,
            s.paragraphs,
            s.questions,
            s.answers
        );
    }
    Ok(())
}

pub fn train_tokenizer(args: &TokenizerTrainArgs) -> anyhow::Result<()> {
    if args.vocab_size < 2 {
        anyhow::bail!("--vocab-size must be at least 2");
    }
    let file = if args.data.is_dir() {
        let files = corpus::squad::qa_files(&args.data).unwrap_or_default();
        match files.into_iter().find(|(s, _)| *s == corpus::SplitName::Train) {
            Some((_, f)) => f,
            None => anyhow::bail!("{}: no *train*.json (SQuAD format) to train a tokenizer on", args.data.display()),
        }
    } else {
        args.data.clone()
    };
    let squad = corpus::squad::SquadFile::read(&file)?;
    let texts = crate::tokenizer::squad_texts(std::slice::from_ref(&squad));
    let tok = crate::tokenizer::train_wordpiece(texts.iter().copied(), args.vocab_size)?;
    crate::tokenizer::save(&tok, &args.out)?;
    println!(
        "wrote {}: WordPiece, {} entries, trained on {} texts of {}",
        args.out.display(),
        tok.get_vocab_size(true),
        texts.len(),
        file.display()
    );
    Ok(())
}
