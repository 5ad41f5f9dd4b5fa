//! Embedders for search by meaning: text in, one unit-length vector per text out.
//!
//! Two kinds, behind one trait ([`Embedder`]): a sentence-transformers model directory run
//! in-process on the CPU ([`local::LocalBert`]: `config.json`, `tokenizer.json`,
//! `model.safetensors`, with the pooling its `1_Pooling/config.json` names), and an
//! OpenAI-compatible `/v1/embeddings` endpoint ([`endpoint::Endpoint`]: Ollama, llama.cpp,
//! vLLM, OpenAI). Nothing is ever fetched: a model is files the user names, an endpoint a URL
//! the user configures ([`EmbedConfig`]); there is no default.
//!
//! Every vector is L2-normalised here, so that callers compare them by a dot product. An
//! embedder's [`Embedder::id`] names the model and everything that changes its vectors: vectors
//! of two ids are never compared.

pub mod endpoint;
pub mod local;

use std::path::PathBuf;

/// What turns texts into vectors.
pub trait Embedder: Send + Sync {
    /// The model and what changes its vectors (`local:all-MiniLM-L6-v2@1a2b3c4d`,
    /// `endpoint:http://…/v1#nomic-embed-text`).
    fn id(&self) -> &str;
    /// How much text one vector stands for, in characters: the chunks of conversation are cut
    /// to it (the model may read less of each: see [`local`]).
    fn window_chars(&self) -> usize;
    /// One unit-length vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Which embedder to use: what `config.json`'s `embed.*` keys (or `FREECODE_EMBED_*`) say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbedConfig {
    /// A sentence-transformers model directory, run in-process.
    Local {
        /// The directory (`config.json`, `tokenizer.json`, `model.safetensors`).
        path: PathBuf,
        /// How many tokens of a chunk the model reads (`embed.readTokens`; `None`:
        /// [`local::DEFAULT_READ_TOKENS`]).
        read_tokens: Option<usize>,
    },
    /// An OpenAI-compatible endpoint.
    Endpoint {
        /// Its base URL, `…/v1`: requests go to `{url}/embeddings`.
        url: String,
        /// The model it is asked for.
        model: String,
        /// Sent as a bearer token when set.
        api_key: Option<String>,
    },
}

impl EmbedConfig {
    /// Loads the model or readies the client.
    pub fn open(&self) -> Result<Box<dyn Embedder>, EmbedError> {
        Ok(match self {
            EmbedConfig::Local { path, read_tokens } => {
                Box::new(local::LocalBert::load(path, *read_tokens)?)
            }
            EmbedConfig::Endpoint {
                url,
                model,
                api_key,
            } => Box::new(endpoint::Endpoint::new(url, model, api_key.clone())?),
        })
    }
}

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model's files cannot be used.
    #[error("embedding model {}: {message}", path.display())]
    Model {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The endpoint failed or answered something unusable.
    #[error("embedding endpoint {url}: {message}")]
    Endpoint {
        /// The URL posted to.
        url: String,
        /// What happened.
        message: String,
    },
    /// Running the model failed.
    #[error("embedding failed: {0}")]
    Run(String),
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// Cuts `text` to at most `max` characters, at a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_makes_unit_length_and_keeps_zero() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        let mut z = vec![0.0, 0.0];
        normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("héllo wörld", 4), "héll");
        assert_eq!(cut("日本語", 10), "日本語");
        assert_eq!(cut("", 3), "");
    }
}
