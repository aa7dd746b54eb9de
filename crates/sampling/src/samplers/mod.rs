//! Every sampler, one file per family, each with llama.cpp's semantics (see the module docs and
//! `docs/SAMPLING.md` for edge values).

pub mod adaptive_p;
pub mod constraints;
pub mod dist;
pub mod dry;
pub mod dry_breakers;
pub mod grammar;
pub mod greedy;
pub mod logit_bias;
pub mod mask;
pub mod min_p;
pub mod mirostat;
pub mod penalties;
pub mod reasoning_budget;
pub mod softmax;
pub mod tail_free;
pub mod temp;
pub mod top_k;
pub mod top_n_sigma;
pub mod top_p;
pub mod typical;
pub mod xtc;

pub use adaptive_p::AdaptiveP;
pub use constraints::{AllowedTokens, BadWords, IgnoreEos, MinTokens};
pub use dist::Dist;
pub use dry::Dry;
pub use dry_breakers::BreakerTokenizer;
pub use grammar::{GrammarMode, GrammarStage};
pub use greedy::Greedy;
pub use logit_bias::LogitBias;
pub use mask::{Mask, TokenFilter};
pub use min_p::MinP;
pub use mirostat::{Mirostat, MirostatV2};
pub use penalties::Penalties;
pub use reasoning_budget::{BudgetState, ReasoningBudget};
pub use softmax::Softmax;
pub use tail_free::TailFree;
pub use temp::{Temp, TempExt};
pub use top_k::TopK;
pub use top_n_sigma::TopNSigma;
pub use top_p::TopP;
pub use typical::Typical;
pub use xtc::Xtc;
