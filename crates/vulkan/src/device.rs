//! Instance and device selection: loads the Vulkan library, optionally enables the Khronos
//! validation layer with a debug messenger that records every message, and picks a physical device
//! (first discrete GPU, else integrated, else virtual, else CPU-type such as llvmpipe; the
//! environment variable `GGS_VULKAN_DEVICE` picks one by index or name substring). One thread at a
//! time creates an instance and device (the validation layer races otherwise).

use crate::error::{Result, VulkanError};
use std::sync::{Arc, Mutex};
use vulkano::Version;
use vulkano::VulkanLibrary;
use vulkano::device::physical::{PhysicalDevice, PhysicalDeviceType, SubgroupFeatures};
use vulkano::device::{Device, DeviceCreateInfo, DeviceExtensions, DeviceFeatures, Queue, QueueCreateInfo, QueueFlags};
use vulkano::instance::debug::{
    DebugUtilsMessageSeverity, DebugUtilsMessageType, DebugUtilsMessenger, DebugUtilsMessengerCallback,
    DebugUtilsMessengerCreateInfo,
};
use vulkano::instance::{Instance, InstanceCreateFlags, InstanceCreateInfo, InstanceExtensions};
use vulkano::shader::ShaderStages;

/// Name of the Khronos validation layer.
pub const VALIDATION_LAYER: &str = "VK_LAYER_KHRONOS_validation";

/// Environment variable choosing the device by index or name substring.
pub const DEVICE_ENV: &str = "GGS_VULKAN_DEVICE";

/// Messages recorded by the debug messenger (validation findings of severity warning or error).
pub type MessageLog = Arc<Mutex<Vec<String>>>;

/// A created device and what the backend needs to know about it.
#[derive(Debug)]
pub(crate) struct Gpu {
    pub device: Arc<Device>,
    pub queue: Arc<Queue>,
    pub name: String,
    pub subgroups: bool,
    /// `shaderFloat64` is enabled (the fused sampling shader needs it).
    pub float64: bool,
    /// `VK_KHR_push_descriptor` is enabled: dispatches push their four buffers into the command
    /// buffer instead of allocating and writing a descriptor set each (the host's cost per
    /// dispatch; `GGS_VULKAN_DESCRIPTOR_SETS=1` turns it off).
    pub push_descriptors: bool,
    pub validation: bool,
    /// The device is a CPU implementation (lavapipe): the host's cores run its work.
    pub cpu_device: bool,
    pub timestamp_period: f32,
    pub timestamps_valid: bool,
    pub max_storage_range: u64,
    pub _messenger: Option<DebugUtilsMessenger>,
}

fn rank(t: PhysicalDeviceType) -> u32 {
    match t {
        PhysicalDeviceType::DiscreteGpu => 0,
        PhysicalDeviceType::IntegratedGpu => 1,
        PhysicalDeviceType::VirtualGpu => 2,
        PhysicalDeviceType::Cpu => 3,
        _ => 4,
    }
}

fn compute_family(pd: &PhysicalDevice) -> Option<u32> {
    let fams = pd.queue_family_properties();
    // Prefer a compute-only family (async compute), else any with compute.
    let compute = |i: &usize| fams[*i].queue_flags.intersects(QueueFlags::COMPUTE);
    (0..fams.len())
        .filter(compute)
        .find(|&i| !fams[i].queue_flags.intersects(QueueFlags::GRAPHICS))
        .or_else(|| (0..fams.len()).find(|i| compute(i)))
        .map(|i| i as u32)
}

/// Picks the device: `choice` (index or name substring) when given, else the best-ranked one.
fn pick(devices: &[Arc<PhysicalDevice>], choice: Option<&str>) -> Result<Arc<PhysicalDevice>> {
    let usable: Vec<&Arc<PhysicalDevice>> =
        devices.iter().filter(|pd| pd.api_version() >= Version::V1_1 && compute_family(pd).is_some()).collect();
    let names = || devices.iter().map(|d| d.properties().device_name.clone()).collect::<Vec<_>>().join(", ");
    if let Some(c) = choice.map(str::trim).filter(|c| !c.is_empty()) {
        if let Ok(i) = c.parse::<usize>() {
            return devices
                .get(i)
                .filter(|pd| usable.iter().any(|u| Arc::ptr_eq(u, pd)))
                .cloned()
                .ok_or_else(|| VulkanError::NoDeviceAtIndex { choice: c.to_string(), devices: names() });
        }
        let lc = c.to_lowercase();
        return usable
            .iter()
            .find(|pd| pd.properties().device_name.to_lowercase().contains(&lc))
            .map(|pd| (*pd).clone())
            .ok_or_else(|| VulkanError::NoDeviceNamed { choice: c.to_string(), devices: names() });
    }
    usable.iter().min_by_key(|pd| rank(pd.properties().device_type)).map(|pd| (*pd).clone()).ok_or_else(|| {
        if devices.is_empty() { VulkanError::NoDevice } else { VulkanError::NoUsableDevice { devices: names() } }
    })
}

/// A vulkano error's text with the Vulkan result code where there is one (vulkano's own text for
/// a driver error is only "a non-validation error occurred").
fn cause(e: vulkano::Validated<vulkano::VulkanError>) -> String {
    match e {
        vulkano::Validated::Error(v) => format!("{v} ({v:?})"),
        vulkano::Validated::ValidationError(v) => v.to_string(),
    }
}

/// Serializes instance and device creation within a process: the Khronos validation layer once
/// crashed (SIGSEGV inside `libVkLayer_khronos_validation`) while test threads created devices at
/// the same time, a race inside the layer, so no two threads create them at once.
static CREATION: Mutex<()> = Mutex::new(());

/// Creates the instance and device. `Err` is why the backend is unavailable.
pub(crate) fn open(validation: bool, choice: Option<&str>, descriptor_sets: bool, log: &MessageLog) -> Result<Gpu> {
    // A panic while holding the lock leaves nothing half-made that the next caller could see.
    let _one_at_a_time = CREATION.lock().unwrap_or_else(|e| e.into_inner());
    let library = VulkanLibrary::new().map_err(|e| VulkanError::LoaderUnavailable { cause: e.to_string() })?;
    let has_layer = library.layer_properties().map(|mut it| it.any(|l| l.name() == VALIDATION_LAYER)).unwrap_or(false);
    let use_validation = validation && has_layer && library.supported_extensions().ext_debug_utils;
    if validation && !use_validation {
        tracing::warn!("validation requested but {VALIDATION_LAYER} or VK_EXT_debug_utils is missing");
    }
    let mut create = InstanceCreateInfo {
        flags: InstanceCreateFlags::ENUMERATE_PORTABILITY,
        enabled_extensions: InstanceExtensions {
            khr_portability_enumeration: library.supported_extensions().khr_portability_enumeration,
            ext_debug_utils: use_validation,
            ..InstanceExtensions::empty()
        },
        max_api_version: Some(Version::V1_3),
        ..InstanceCreateInfo::application_from_cargo_toml()
    };
    if !create.enabled_extensions.khr_portability_enumeration {
        create.flags = InstanceCreateFlags::empty();
    }
    let callback = use_validation.then(|| {
        let log = log.clone();
        // SAFETY: the callback never calls into Vulkan; it only records the message.
        unsafe {
            DebugUtilsMessengerCallback::new(move |sev, ty, data| {
                let msg = format!("[{sev:?} {ty:?}] {}", data.message);
                // Validation findings are recorded (tests fail on any); general messages, such as
                // the loader's "layer forced enabled by VK_LOADER_LAYERS_ENABLE", are only logged.
                if ty.intersects(DebugUtilsMessageType::VALIDATION) {
                    tracing::error!(target: "vulkan::validation", "{msg}");
                    if let Ok(mut l) = log.lock() {
                        l.push(msg);
                    }
                } else {
                    tracing::warn!(target: "vulkan::validation", "{msg}");
                }
            })
        }
    });
    let messenger_info = callback.as_ref().map(|cb| DebugUtilsMessengerCreateInfo {
        message_severity: DebugUtilsMessageSeverity::ERROR | DebugUtilsMessageSeverity::WARNING,
        message_type: DebugUtilsMessageType::GENERAL | DebugUtilsMessageType::VALIDATION,
        ..DebugUtilsMessengerCreateInfo::user_callback(cb.clone())
    });
    if use_validation {
        create.enabled_layers = vec![VALIDATION_LAYER.to_string()];
        // SAFETY: the callback is valid for the instance's lifetime (it is reference counted).
        create.debug_utils_messengers = messenger_info.clone().into_iter().collect();
    }
    let instance = Instance::new(library, create).map_err(|e| VulkanError::InstanceCreation { cause: cause(e) })?;
    let messenger = match messenger_info {
        Some(info) => Some(
            DebugUtilsMessenger::new(instance.clone(), info)
                .map_err(|e| VulkanError::DebugMessenger { cause: e.to_string() })?,
        ),
        None => None,
    };
    let devices: Vec<Arc<PhysicalDevice>> = instance
        .enumerate_physical_devices()
        .map_err(|e| VulkanError::DeviceEnumeration { cause: e.to_string() })?
        .collect();
    let env_choice = std::env::var(DEVICE_ENV).ok();
    let pd = pick(&devices, choice.or(env_choice.as_deref()))?;
    let family = compute_family(&pd).expect("pick only returns devices with a compute family");
    let props = pd.properties();
    let subgroups = props.subgroup_supported_stages.is_some_and(|s| s.contains(ShaderStages::COMPUTE))
        && props.subgroup_supported_operations.is_some_and(|o| {
            o.contains(SubgroupFeatures::BASIC | SubgroupFeatures::ARITHMETIC | SubgroupFeatures::VOTE)
        })
        && props.subgroup_size.is_some_and(|s| (4..=128).contains(&s));
    let float64 = pd.supported_features().shader_float64;
    let push_descriptors = pd.supported_extensions().khr_push_descriptor
        && !descriptor_sets
        && std::env::var_os("GGS_VULKAN_DESCRIPTOR_SETS").is_none_or(|v| v != "1");
    let (device, mut queues) = Device::new(
        pd.clone(),
        DeviceCreateInfo {
            queue_create_infos: vec![QueueCreateInfo { queue_family_index: family, ..Default::default() }],
            enabled_features: DeviceFeatures { shader_float64: float64, ..DeviceFeatures::empty() },
            enabled_extensions: DeviceExtensions { khr_push_descriptor: push_descriptors, ..DeviceExtensions::empty() },
            ..Default::default()
        },
    )
    .map_err(|e| VulkanError::DeviceCreation { device: props.device_name.clone(), cause: cause(e) })?;
    let queue = queues.next().expect("one queue was requested");
    let timestamps_valid = pd.queue_family_properties()[family as usize].timestamp_valid_bits.is_some();
    tracing::info!(device = %props.device_name, kind = ?props.device_type, subgroups, "vulkan device selected");
    Ok(Gpu {
        device,
        queue,
        name: props.device_name.clone(),
        subgroups,
        float64,
        push_descriptors,
        validation: use_validation,
        cpu_device: props.device_type == PhysicalDeviceType::Cpu,
        timestamp_period: props.timestamp_period,
        timestamps_valid,
        max_storage_range: u64::from(props.max_storage_buffer_range),
        _messenger: messenger,
    })
}

/// What a report needs to know about the opened device: identity, driver and the limits that shape
/// the kernels (`gpu-report` prints it first).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// `deviceName`.
    pub name: String,
    /// Discrete, integrated, virtual or CPU (`Debug` of vulkano's `PhysicalDeviceType`).
    pub device_type: String,
    /// `vendorID` and `deviceID`.
    pub vendor_id: u32,
    /// See `vendor_id`.
    pub device_id: u32,
    /// The driver's name and info string (Vulkan 1.2 driver properties), where reported.
    pub driver: String,
    /// `driverVersion` as the vendor encodes it (NVIDIA: 10.8.8.6 bits), raw.
    pub driver_version: u32,
    /// The device's Vulkan version.
    pub api_version: String,
    /// `subgroupSize`, where reported.
    pub subgroup_size: Option<u32>,
    /// Whether the backend uses its subgroup shader variants.
    pub subgroups_used: bool,
    /// Whether `shaderFloat64` is enabled.
    pub float64: bool,
    /// Whether dispatches push their descriptors (`VK_KHR_push_descriptor`).
    pub push_descriptors: bool,
    /// `maxComputeWorkGroupInvocations`.
    pub max_workgroup_invocations: u32,
    /// `maxComputeWorkGroupSize`.
    pub max_workgroup_size: [u32; 3],
    /// `maxComputeWorkGroupCount`.
    pub max_workgroup_count: [u32; 3],
    /// `maxComputeSharedMemorySize`, bytes.
    pub max_shared_memory: u32,
    /// `maxStorageBufferRange`, bytes.
    pub max_storage_buffer_range: u64,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    /// Whether the validation layer is on.
    pub validation: bool,
}

impl Gpu {
    /// The report of this device.
    pub(crate) fn info(&self) -> DeviceInfo {
        let p = self.device.physical_device().properties();
        let driver = [p.driver_name.clone(), p.driver_info.clone()].into_iter().flatten().collect::<Vec<_>>().join(" ");
        DeviceInfo {
            name: self.name.clone(),
            device_type: format!("{:?}", p.device_type),
            vendor_id: p.vendor_id,
            device_id: p.device_id,
            driver,
            driver_version: p.driver_version,
            api_version: p.api_version.to_string(),
            subgroup_size: p.subgroup_size,
            subgroups_used: self.subgroups,
            float64: self.float64,
            push_descriptors: self.push_descriptors,
            max_workgroup_invocations: p.max_compute_work_group_invocations,
            max_workgroup_size: p.max_compute_work_group_size,
            max_workgroup_count: p.max_compute_work_group_count,
            max_shared_memory: p.max_compute_shared_memory_size,
            max_storage_buffer_range: u64::from(p.max_storage_buffer_range),
            timestamp_period: self.timestamp_period,
            validation: self.validation,
        }
    }
}
