//! Subword tokenizers for question answering (the `tokenizers` crate, pure
//! Rust): training a WordPiece vocabulary with BERT's normaliser and
//! pre-tokenizer (lowercase, accents stripped, punctuation split, every CJK
//! character its own word), reading any `tokenizer.json`, and cutting text
//! into pieces with character offsets into the original text.

use anyhow::{anyhow, Context, Result};
use corpus::qa::squad::{Piece, SquadFile};
use std::path::Path;
use tokenizers::models::wordpiece::{WordPiece, WordPieceTrainerBuilder};
use tokenizers::models::TrainerWrapper;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{AddedToken, Tokenizer};

/// The file name a QA dataset folder's tokenizer has by default.
pub const FILE: &str = "tokenizer.json";

/// Special tokens of a trained vocabulary.
const UNK: &str = "[UNK]";

/// Reads a `tokenizer.json`; a malformed file is named with the line and
/// column of the problem.
pub fn load(path: &Path) -> Result<Tokenizer> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    match serde_json::from_str::<serde_json::Value>(&text) {
        Err(e) => return Err(anyhow!("{}:{}: not JSON: {e}", path.display(), e.line())),
        Ok(v) if v.get("model").is_none() => {
            return Err(anyhow!("{}:1: not a tokenizer.json (no \"model\" field)", path.display()))
        }
        Ok(_) => {}
    }
    // serde_json's messages say "at line L column C".
    text.parse::<Tokenizer>().map_err(|e| anyhow!("{}: not a valid tokenizer: {e}", path.display()))
}

/// Text → sub-tokens with character offsets into `text` (no special tokens).
pub fn pieces(tokenizer: &Tokenizer, text: &str) -> std::result::Result<Vec<Piece>, String> {
    let enc = tokenizer.encode_char_offsets(text, false).map_err(|e| e.to_string())?;
    Ok(enc
        .get_tokens()
        .iter()
        .zip(enc.get_offsets())
        .map(|(t, &(start, end))| Piece { text: t.clone(), start, end })
        .collect())
}

/// Trains a WordPiece tokenizer (BERT normaliser and pre-tokenizer) of at
/// most `vocab_size` entries on `texts`.
pub fn train_wordpiece<'a>(texts: impl Iterator<Item = &'a str> + Send, vocab_size: usize) -> Result<Tokenizer> {
    let model = WordPiece::builder().unk_token(UNK.into()).build().map_err(|e| anyhow!("{e}"))?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(BertNormalizer::default())).map_err(|e| anyhow!("{e}"))?;
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    let mut trainer: TrainerWrapper = WordPieceTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(vec![AddedToken::from(UNK, true)])
        .build()
        .into();
    tokenizer.train(&mut trainer, texts).map_err(|e| anyhow!("training the tokenizer: {e}"))?;
    Ok(tokenizer)
}

/// Every context and question of SQuAD files, for training a tokenizer.
pub fn squad_texts(files: &[SquadFile]) -> Vec<&str> {
    files
        .iter()
        .flat_map(|f| &f.data)
        .flat_map(|a| &a.paragraphs)
        .flat_map(|p| std::iter::once(p.context.as_str()).chain(p.qas.iter().map(|q| q.question.as_str())))
        .collect()
}

/// Writes a tokenizer atomically (temp file, then rename).
pub fn save(tokenizer: &Tokenizer, path: &Path) -> Result<()> {
    let json = tokenizer.to_string(true).map_err(|e| anyhow!("{e}"))?;
    corpus::io::write_atomic(path, json)?;
    Ok(())
}

/// A tokenizer trained by [`train_on`], and on what.
pub struct Trained {
    pub tokenizer: Tokenizer,
    /// Texts (contexts and questions) it was trained on.
    pub texts: usize,
    /// The SQuAD-format file they came from.
    pub file: std::path::PathBuf,
}

/// Trains a WordPiece tokenizer of `vocab_size` entries on `data`: a
/// SQuAD-format file, or a folder whose training file (`*train*.json`) is used.
pub fn train_on(data: &Path, vocab_size: usize) -> Result<Trained> {
    if vocab_size < 2 {
        anyhow::bail!("--vocab-size must be at least 2");
    }
    let file = if data.is_dir() {
        let files = corpus::qa::squad::qa_files(data).unwrap_or_default();
        match files.into_iter().find(|(s, _)| *s == corpus::SplitName::Train) {
            Some((_, f)) => f,
            None => anyhow::bail!("{}: no *train*.json (SQuAD format) to train a tokenizer on", data.display()),
        }
    } else {
        data.to_path_buf()
    };
    let squad = SquadFile::read(&file)?;
    let texts = squad_texts(std::slice::from_ref(&squad));
    let tokenizer = train_wordpiece(texts.iter().copied(), vocab_size)?;
    Ok(Trained { tokenizer, texts: texts.len(), file })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = r#"{"version": "1.1", "data": [
 {"title": "Normans", "paragraphs": [
  {"context": "The Normans (Norman: Nourmands; French: Normands) gave their name to Normandy, a region in France. Café au lait.",
   "qas": [{"id": "q1", "question": "Who gave their name to Normandy?",
            "answers": [{"text": "The Normans", "answer_start": 0}, {"text": "Normans", "answer_start": 4}]},
           {"id": "q2", "question": "In what country is Normandy?", "answers": [{"text": "France", "answer_start": 91}]},
           {"id": "q3", "question": "What drink?", "answers": [{"text": "Café au lait", "answer_start": 99}]},
           {"id": "q4", "question": "Which names?", "answers": [{"text": "Nourmands; French: Normands", "answer_start": 21}]}]}]},
 {"title": "\u4e2d\u56fd", "paragraphs": [
  {"context": "\u5317\u4eac\u662f\u4e2d\u56fd\u7684\u9996\u90fd\uff0c\u4eba\u53e3\u7ea62189\u4e07\u3002",
   "qas": [{"id": "q5", "question": "\u4e2d\u56fd\u7684\u9996\u90fd\u662f\u54ea\u91cc\uff1f",
            "answers": [{"text": "\u5317\u4eac", "answer_start": 0}]},
           {"id": "q6", "question": "\u4eba\u53e3\u591a\u5c11\uff1f", "answers": [{"text": "2189\u4e07", "answer_start": 12}]}]}]}
]}"#;

    fn fixture() -> SquadFile {
        SquadFile::parse(Path::new("fixture.json"), FIXTURE).unwrap()
    }

    #[test]
    fn tagged_sub_tokens_give_back_every_answer_exactly_chinese_included() {
        let file = fixture();
        let tok = train_wordpiece(squad_texts(std::slice::from_ref(&file)).into_iter(), 200).unwrap();
        let tokenize = |t: &str| pieces(&tok, t);
        let (sentences, items) = corpus::qa::squad::qa_sentences(
            Path::new("fixture.json"),
            FIXTURE,
            &file,
            &tokenize,
            corpus::qa::squad::Answers::Required,
        )
        .unwrap();
        assert_eq!(sentences.len(), 6);
        for (s, item) in sentences.iter().zip(&items) {
            let spans = corpus::Scheme::Iob2.decode(&s.tags);
            assert_eq!(spans.len(), 1, "{}: one answer span", item.id);
            let text = corpus::qa::squad::span_text(&item.context, &item.offsets, spans[0].start, spans[0].end - 1);
            assert_eq!(text, item.answers[0], "{}", item.id);
            assert!(!item.question.is_empty(), "{}: the question is cut into sub-tokens", item.id);
        }
        // Every gold answer, not only the first that training tags: tag it
        // by offsets, read it back.
        let questions = file.data.iter().flat_map(|a| &a.paragraphs).flat_map(|p| p.qas.iter().map(move |q| (p, q)));
        let mut answers = 0;
        for ((_, q), item) in questions.zip(&items) {
            for a in &q.answers {
                let end = a.answer_start + a.text.chars().count();
                let tags = corpus::qa::squad::answer_tags(&item.offsets, a.answer_start, end).unwrap();
                let span = &corpus::Scheme::Iob2.decode(&tags)[0];
                let text = corpus::qa::squad::span_text(&item.context, &item.offsets, span.start, span.end - 1);
                assert_eq!(text, a.text, "{}", q.id);
                answers += 1;
            }
        }
        assert_eq!(answers, 7);
        // BERT's pre-tokenizer makes every CJK character its own token.
        let zh = &sentences[4];
        assert_eq!(&zh.tokens[..4], ["北", "京", "是", "中"]);
        assert_eq!(zh.line, 11, "the line of the question id");
    }

    #[test]
    fn a_damaged_tokenizer_file_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, "{\n  \"model\": {\n    \"type\": \"WordPiece\",\n  oops\n}").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("tokenizer.json:4"), "{e}");
        std::fs::write(&p, "{\"version\": \"1.0\"}").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("no \"model\""), "{e}");
        // A saved tokenizer reads back and cuts text the same way.
        let file = fixture();
        let tok = train_wordpiece(squad_texts(std::slice::from_ref(&file)).into_iter(), 200).unwrap();
        save(&tok, &p).unwrap();
        let again = load(&p).unwrap();
        let text = "The Normans of France 北京";
        assert_eq!(pieces(&tok, text).unwrap(), pieces(&again, text).unwrap());
    }
}
