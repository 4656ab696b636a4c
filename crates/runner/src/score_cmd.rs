//! `seqlab score`.

use crate::cli::ScoreArgs;
use corpus::score::{Mode, ScoreFile};

pub fn run(args: &ScoreArgs) -> anyhow::Result<()> {
    let file = ScoreFile::read(&args.file, args.keep_docstart)?;
    let mode = args.scheme.map_or(Mode::Conlleval, Mode::Strict);
    let counts = file.score(mode);
    if args.json {
        println!("{}", serde_json::to_string(&counts.report())?);
    } else {
        print!("{}", counts.conlleval_text());
    }
    Ok(())
}
