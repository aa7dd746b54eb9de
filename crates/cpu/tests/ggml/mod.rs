//! Test support: the only place with `unsafe` ggml FFI (through `ggml-sys-bleedingedge`, ggml as of
//! llama.cpp b2757). A [`Ctx`] owns one ggml context sized for the test; tensors are created, filled,
//! combined with ggml's graph functions, computed on ggml's CPU backend and read back as `Vec`s.
//! Every pointer handed out stays valid until the `Ctx` is dropped (ggml allocates from the
//! context's arena and frees it all in `ggml_free`).
#![allow(dead_code)]

use ggml_sys_bleedingedge as sys;
use graph::f16;

/// A ggml tensor inside a [`Ctx`].
pub type T = *mut sys::ggml_tensor;

/// ggml element types used by the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    F32,
    F16,
    I32,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q4K,
    Q5K,
    Q6K,
}

impl Ty {
    fn raw(self) -> sys::ggml_type {
        match self {
            Ty::F32 => sys::ggml_type_GGML_TYPE_F32,
            Ty::F16 => sys::ggml_type_GGML_TYPE_F16,
            Ty::I32 => sys::ggml_type_GGML_TYPE_I32,
            Ty::Q8_0 => sys::ggml_type_GGML_TYPE_Q8_0,
            Ty::Q4_0 => sys::ggml_type_GGML_TYPE_Q4_0,
            Ty::Q4_1 => sys::ggml_type_GGML_TYPE_Q4_1,
            Ty::Q5_0 => sys::ggml_type_GGML_TYPE_Q5_0,
            Ty::Q5_1 => sys::ggml_type_GGML_TYPE_Q5_1,
            Ty::Q4K => sys::ggml_type_GGML_TYPE_Q4_K,
            Ty::Q5K => sys::ggml_type_GGML_TYPE_Q5_K,
            Ty::Q6K => sys::ggml_type_GGML_TYPE_Q6_K,
        }
    }

    /// Quantizes `rows` rows of `n_per_row` values with ggml's own quantizer (`ggml_quantize_chunk`,
    /// no importance matrix) and returns the blocks.
    pub fn quantize(self, v: &[f32], n_per_row: usize) -> Vec<u8> {
        let rows = v.len() / n_per_row;
        // SAFETY: plain FFI; `v` holds `rows * n_per_row` values and `out` the row size times rows.
        unsafe {
            let row = sys::ggml_row_size(self.raw(), n_per_row as i64);
            let mut out = vec![0u8; row * rows];
            let n = sys::ggml_quantize_chunk(
                self.raw(),
                v.as_ptr(),
                out.as_mut_ptr().cast(),
                0,
                rows as i64,
                n_per_row as i64,
                std::ptr::null(),
            );
            assert_eq!(n, out.len());
            out
        }
    }
}

/// ggml's activation quantizer for the K-quants (`quantize_row_q8_K`, through the type traits):
/// `x` (a multiple of 256 long) as `q8_K` blocks (`d` f32, 256 `i8`, 16 `i16` sums; 292 bytes each).
/// The output starts zeroed (ggml leaves an all-zero block's sums unwritten).
pub fn quantize_q8k(x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; x.len() / 256 * 292];
    // SAFETY: plain FFI; `x` holds `x.len()` floats and `out` that many q8_K blocks' bytes.
    unsafe {
        let traits = sys::ggml_internal_get_type_traits(sys::ggml_type_GGML_TYPE_Q8_K);
        let from_float = traits.from_float.expect("q8_K has a quantizer");
        from_float(x.as_ptr(), out.as_mut_ptr().cast(), x.len() as i64);
    }
    out
}

/// One ggml context (arena) and the raw pointer to it.
#[derive(Debug)]
pub struct Ctx {
    ctx: *mut sys::ggml_context,
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: created by `ggml_init` in `new`, freed once.
        unsafe { sys::ggml_free(self.ctx) }
    }
}

impl Ctx {
    /// A context with `mb` MiB of arena (tensor data, graph and compute work buffer).
    pub fn new(mb: usize) -> Ctx {
        let params = sys::ggml_init_params { mem_size: mb << 20, mem_buffer: std::ptr::null_mut(), no_alloc: false };
        // SAFETY: plain FFI call with valid parameters.
        let ctx = unsafe { sys::ggml_init(params) };
        assert!(!ctx.is_null(), "ggml_init failed");
        Ctx { ctx }
    }

    /// The raw context, for calling ggml op constructors.
    pub fn raw(&self) -> *mut sys::ggml_context {
        self.ctx
    }

    /// A new tensor of shape `ne` (ggml order, 1 to 4 dims).
    pub fn tensor(&self, ty: Ty, ne: &[usize]) -> T {
        let ne64: Vec<i64> = ne.iter().map(|&n| n as i64).collect();
        // SAFETY: `ne64` outlives the call; ggml copies the shape.
        let t = unsafe { sys::ggml_new_tensor(self.ctx, ty.raw(), ne.len() as i32, ne64.as_ptr()) };
        assert!(!t.is_null(), "ggml_new_tensor failed (arena too small?)");
        t
    }

    /// Number of elements of `t`.
    pub fn numel(t: T) -> usize {
        // SAFETY: `t` is a live tensor of this context.
        unsafe { (*t).ne.iter().product::<i64>() as usize }
    }

    /// Fills a contiguous f32 or f16 tensor from f32 values.
    pub fn set_f32(&self, t: T, v: &[f32]) {
        assert_eq!(v.len(), Self::numel(t));
        // SAFETY: the tensor is contiguous with `numel` elements of its type.
        unsafe {
            match (*t).type_ {
                x if x == sys::ggml_type_GGML_TYPE_F32 => {
                    std::slice::from_raw_parts_mut((*t).data as *mut f32, v.len()).copy_from_slice(v)
                }
                x if x == sys::ggml_type_GGML_TYPE_F16 => {
                    let d = std::slice::from_raw_parts_mut((*t).data as *mut f16, v.len());
                    d.iter_mut().zip(v).for_each(|(d, &x)| *d = f16::from_f32(x));
                }
                other => panic!("set_f32 on ggml type {other}"),
            }
        }
    }

    /// Fills a tensor with raw bytes (`ggml_nbytes` of them).
    pub fn set_bytes(&self, t: T, b: &[u8]) {
        // SAFETY: a live tensor of `ggml_nbytes(t)` bytes, checked against `b`.
        unsafe {
            assert_eq!(sys::ggml_nbytes(t), b.len());
            std::slice::from_raw_parts_mut((*t).data as *mut u8, b.len()).copy_from_slice(b);
        }
    }

    /// Fills a contiguous i32 tensor.
    pub fn set_i32(&self, t: T, v: &[i32]) {
        assert_eq!(v.len(), Self::numel(t));
        // SAFETY: as `set_f32`.
        unsafe {
            assert_eq!((*t).type_, sys::ggml_type_GGML_TYPE_I32);
            std::slice::from_raw_parts_mut((*t).data as *mut i32, v.len()).copy_from_slice(v);
        }
    }

    /// Computes `out` (and everything it depends on) on ggml's CPU backend with `threads` threads.
    pub fn compute(&self, out: T, threads: usize) {
        // SAFETY: graph and tensors live in this context's arena.
        unsafe {
            let gf = sys::ggml_new_graph(self.ctx);
            sys::ggml_build_forward_expand(gf, out);
            let status = sys::ggml_graph_compute_with_ctx(self.ctx, gf, threads as i32);
            assert_eq!(status, sys::ggml_status_GGML_STATUS_SUCCESS, "ggml compute failed");
        }
    }

    /// A contiguous f32 or f16 tensor's elements as f32.
    pub fn read_f32(&self, t: T) -> Vec<f32> {
        let n = Self::numel(t);
        // SAFETY: computed contiguous tensor of `n` elements.
        unsafe {
            match (*t).type_ {
                x if x == sys::ggml_type_GGML_TYPE_F32 => {
                    std::slice::from_raw_parts((*t).data as *const f32, n).to_vec()
                }
                x if x == sys::ggml_type_GGML_TYPE_F16 => {
                    std::slice::from_raw_parts((*t).data as *const f16, n).iter().map(|x| x.to_f32()).collect()
                }
                other => panic!("read_f32 on ggml type {other}"),
            }
        }
    }

    /// A contiguous i32 tensor's elements.
    pub fn read_i32(&self, t: T) -> Vec<i32> {
        // SAFETY: as `read_f32`.
        unsafe {
            assert_eq!((*t).type_, sys::ggml_type_GGML_TYPE_I32);
            std::slice::from_raw_parts((*t).data as *const i32, Self::numel(t)).to_vec()
        }
    }

    // ----- op constructors (thin wrappers so the tests need no `unsafe`) -----

    pub fn add(&self, a: T, b: T) -> T {
        // SAFETY: live tensors of this context (also for every wrapper below).
        unsafe { sys::ggml_add(self.ctx, a, b) }
    }
    pub fn mul(&self, a: T, b: T) -> T {
        unsafe { sys::ggml_mul(self.ctx, a, b) }
    }
    pub fn scale(&self, a: T, s: f32) -> T {
        unsafe { sys::ggml_scale(self.ctx, a, s) }
    }
    pub fn get_rows(&self, a: T, ids: T) -> T {
        unsafe { sys::ggml_get_rows(self.ctx, a, ids) }
    }
    pub fn soft_max_ext(&self, a: T, mask: Option<T>, scale: f32) -> T {
        unsafe {
            sys::ggml_soft_max_ext(self.ctx, a, mask.unwrap_or(std::ptr::null_mut()), std::ptr::null_mut(), scale, 0.0)
        }
    }
    pub fn rms_norm(&self, a: T, eps: f32) -> T {
        unsafe { sys::ggml_rms_norm(self.ctx, a, eps) }
    }
    /// `mode` 0 (normal) or 2 (neox); no YaRN (ext_factor 0, attn_factor 1).
    pub fn rope(&self, a: T, pos: T, n_dims: i32, mode: i32, freq_base: f32, freq_scale: f32) -> T {
        unsafe {
            sys::ggml_rope_custom(self.ctx, a, pos, n_dims, mode, 0, 0, freq_base, freq_scale, 0.0, 1.0, 32.0, 1.0)
        }
    }
    /// `ggml_rope_custom` with every YaRN parameter (`ext_factor`, `attn_factor`, `beta_fast`,
    /// `beta_slow`, `n_ctx_orig`).
    #[allow(clippy::too_many_arguments)]
    pub fn rope_yarn(
        &self,
        a: T,
        pos: T,
        n_dims: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        yarn: [f32; 4],
    ) -> T {
        let [ext_factor, attn_factor, beta_fast, beta_slow] = yarn;
        unsafe {
            sys::ggml_rope_custom(
                self.ctx,
                a,
                pos,
                n_dims,
                mode,
                0,
                n_ctx_orig,
                freq_base,
                freq_scale,
                ext_factor,
                attn_factor,
                beta_fast,
                beta_slow,
            )
        }
    }
    pub fn mul_mat(&self, a: T, b: T) -> T {
        unsafe { sys::ggml_mul_mat(self.ctx, a, b) }
    }
    pub fn argmax(&self, a: T) -> T {
        unsafe { sys::ggml_argmax(self.ctx, a) }
    }
    pub fn sum_rows(&self, a: T) -> T {
        unsafe { sys::ggml_sum_rows(self.ctx, a) }
    }
    /// Copies `a` into `b` (converting to `b`'s type); returns the node to compute.
    pub fn cpy(&self, a: T, b: T) -> T {
        unsafe { sys::ggml_cpy(self.ctx, a, b) }
    }
    pub fn argsort(&self, a: T, desc: bool) -> T {
        let order =
            if desc { sys::ggml_sort_order_GGML_SORT_ORDER_DESC } else { sys::ggml_sort_order_GGML_SORT_ORDER_ASC };
        unsafe { sys::ggml_argsort(self.ctx, a, order) }
    }
    pub fn top_k(&self, a: T, k: usize) -> T {
        unsafe { sys::ggml_cont(self.ctx, sys::ggml_top_k(self.ctx, a, k as i32)) }
    }
    pub fn cont(&self, a: T) -> T {
        unsafe { sys::ggml_cont(self.ctx, a) }
    }
    pub fn transpose(&self, a: T) -> T {
        unsafe { sys::ggml_transpose(self.ctx, a) }
    }
}
