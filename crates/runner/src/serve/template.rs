//! Chat messages rendered into a prompt with the model's chat template (`tokenizer.chat_template`
//! of its GGUF), by a real Jinja engine (minijinja, with Python's string methods as Hugging Face
//! templates use them), as llama.cpp renders it: `messages`, `add_generation_prompt`,
//! `bos_token`, `eos_token`, and `raise_exception`.

use super::api::ApiError;
use minijinja::{Environment, Error, ErrorKind, context};
use serde_json::Value;

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    /// Compiles `source`; `bos` and `eos` are the special tokens' texts.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self, String> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| format!("the chat template does not compile: {e}"))?;
        Ok(ChatTemplate { env, bos: bos.to_string(), eos: eos.to_string() })
    }

    /// The prompt for `messages` (`{role, content}` objects), ending where the assistant's
    /// answer starts.
    pub fn render(&self, messages: &[Value]) -> Result<String, ApiError> {
        let t = self.env.get_template("chat").map_err(|e| ApiError::status(500, "server_error", e.to_string()))?;
        t.render(context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => self.bos,
            eos_token => self.eos,
        })
        .map_err(|e| ApiError::invalid("messages", format!("the chat template refused the messages: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// SmolLM2-Instruct's template, as its GGUF holds it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn smollm2_template_renders_as_llama_cpp() {
        let t = ChatTemplate::new(SMOLLM2, "<|im_start|>", "<|im_end|>").unwrap();
        let p = t.render(&[json!({"role": "user", "content": "Hi"})]).unwrap();
        assert_eq!(
            p,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn python_methods_and_raise_exception_work() {
        let src = "{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}{{ raise_exception('bad role ' + m['role']) }}{% endif %}{{ m['content'].strip().upper() }}|{% endfor %}{{ bos_token }}";
        let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
        assert_eq!(t.render(&[json!({"role": "user", "content": "  hi "})]).unwrap(), "HI|<s>");
        let e = t.render(&[json!({"role": "tool", "content": "x"})]).unwrap_err();
        assert!(e.message.contains("bad role tool") && e.status == 400, "{e:?}");
        assert!(ChatTemplate::new("{% for %}", "", "").is_err());
    }
}
