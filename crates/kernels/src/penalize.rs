//! llama.cpp's repetition, frequency and presence penalties on one logit, the one arithmetic of
//! the CPU sampler (`sampling::samplers::Penalties`), the CPU backend's `penalize` op and the
//! host side of the windowed backend form; the Vulkan shader `shaders/penalize.comp` repeats it
//! in GLSL and the conformance suite holds it to the f64 reference on the edge values.

/// `x` of a token seen `count > 0` times: `x / repeat` for a positive `x`, else `x * repeat`,
/// minus [`subtrahend`] (llama.cpp's `llama_sampler_penalties_apply`, in its f32 order).
#[inline]
pub fn penalize(x: f32, count: f32, repeat: f32, freq: f32, present: f32) -> f32 {
    let scaled = if x <= 0.0 { x * repeat } else { x / repeat };
    scaled - subtrahend(count, freq, present)
}

/// What a token seen `count > 0` times loses after the repetition penalty: `count * freq +
/// present`, in f32.
#[inline]
pub fn subtrahend(count: f32, freq: f32, present: f32) -> f32 {
    count * freq + present
}
