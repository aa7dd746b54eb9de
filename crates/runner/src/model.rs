//! `Model`: a configuration, its weights and (for real models) a tokenizer; built from seeded
//! random weights (the demo) or loaded from a GGUF file (`gguf_model.rs`).

use crate::config::Config;
use crate::error::Result;
use crate::tokenizer::Tokenizer;
use crate::weights::Weights;
use graph::DType;

/// A model ready to run.
#[derive(Debug)]
pub struct Model {
    /// A short description (file name, or the demo's parameters).
    pub name: String,
    /// Hyper-parameters.
    pub config: Config,
    /// Tensors by GGUF name.
    pub weights: Weights,
    /// The tokenizer, where the model has one (the random demo model has none: it prints ids).
    pub tokenizer: Option<Tokenizer>,
    /// The chat template (`tokenizer.chat_template`, Jinja), where the model file has one.
    pub chat_template: Option<String>,
    /// The sampling defaults the model file sets (`general.sampling.*`; none for the demo).
    pub sampling: crate::sampling_defaults::ModelSampling,
    /// The file it was read from, as given (none for the demo).
    pub path: Option<std::path::PathBuf>,
}

impl Model {
    /// Seeded random weights for `config`, matrices in `dtype` (f32, f16 or bf16).
    pub fn random(config: Config, dtype: DType, seed: u64) -> Result<Model> {
        let weights = Weights::random(&config, dtype, seed)?;
        let name = format!(
            "random {dtype} model (seed {seed}): {} blocks of width {}, {} heads / {} KV heads, vocabulary {}",
            config.n_layer, config.n_embd, config.n_head, config.n_head_kv, config.n_vocab
        );
        Ok(Model {
            name,
            config,
            weights,
            tokenizer: None,
            chat_template: None,
            sampling: Default::default(),
            path: None,
        })
    }

    /// A model from parts; checks that the weights fit the configuration.
    pub fn new(name: String, config: Config, weights: Weights, tokenizer: Option<Tokenizer>) -> Result<Model> {
        config.validate()?;
        weights.check(&config)?;
        Ok(Model { name, config, weights, tokenizer, chat_template: None, sampling: Default::default(), path: None })
    }
}
