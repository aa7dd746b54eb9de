//! The Vulkan backend on `vulkano`: device selection ([`device`]), buffers in device-local and
//! host-visible memory, one compute pipeline per shader variant ([`shaders`]), and the op families
//! ([`ops`], one module per family, same names as the CPU kernels and the GLSL in `shaders/`).
//!
//! [`VulkanBackend::new`] returns [`sched::BackendError::Unavailable`] naming the cause when there is
//! no Vulkan loader or no usable device; nothing panics and the CPU path is unaffected. Every error
//! is a [`VulkanError`] inside the crate ([`error`]), converted into a `sched::BackendError` at the
//! `Backend` trait.

mod backend;
pub mod device;
mod encoder;
pub mod error;
mod ops;
pub mod profile;
mod push;
pub mod shaders;

pub use backend::{Options, STAGING_MAX, STAGING_MIN, STAGING_PER_CLASS, VulkanBackend};
pub use error::{NodeError, VulkanError};

/// The backend's name in plans and errors.
pub const NAME: &str = "vulkan";
