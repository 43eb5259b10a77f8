//! Choosing one device of a backend: by index, or by a piece of its name.
//!
//! A node may have several implementations of one backend (PoCL and Mesa's
//! rusticl both drive OpenCL on a CPU; a GPU node adds the vendor's), and
//! their order is the ICD loader's, not the user's. A name picks the same
//! device wherever it is listed.

use std::str::FromStr;

use crate::device::DeviceInfo;

/// Which device of a backend to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSelector {
    /// The device's index in discovery order (`--device 1`).
    Index(usize),
    /// The first device whose name or platform contains this text, ignoring
    /// case (`--device llvmpipe`, `--device rusticl`, `--device "Portable
    /// Computing"`).
    Name(String),
}

impl Default for DeviceSelector {
    fn default() -> Self {
        DeviceSelector::Index(0)
    }
}

impl FromStr for DeviceSelector {
    type Err = std::convert::Infallible;

    /// Digits are an index; anything else is a piece of a name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Ok(match s.parse::<usize>() {
            Ok(index) => DeviceSelector::Index(index),
            Err(_) => DeviceSelector::Name(s.to_string()),
        })
    }
}

impl std::fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSelector::Index(i) => write!(f, "{i}"),
            DeviceSelector::Name(name) => write!(f, "{name:?}"),
        }
    }
}

impl DeviceSelector {
    /// The index in `devices` this selects, or a message that lists every
    /// device (index, name and platform) so the user can choose one.
    pub fn position(&self, devices: &[&DeviceInfo]) -> Result<usize, String> {
        let found = match self {
            DeviceSelector::Index(i) => (*i < devices.len()).then_some(*i),
            DeviceSelector::Name(name) => {
                let needle = name.to_lowercase();
                devices.iter().position(|d| {
                    !needle.is_empty()
                        && (d.name.to_lowercase().contains(&needle) || d.platform.to_lowercase().contains(&needle))
                })
            }
        };
        found.ok_or_else(|| {
            let listed: Vec<String> =
                devices.iter().enumerate().map(|(i, d)| format!("{i}: {} ({})", d.name, d.platform)).collect();
            let wanted = match self {
                DeviceSelector::Index(i) => format!("no device {i}"),
                DeviceSelector::Name(name) => format!("no device whose name or platform contains {name:?}"),
            };
            match devices.first() {
                Some(d) => format!("{} has {wanted}; its devices are {}", d.backend, listed.join(", ")),
                None => format!("{wanted}: the backend lists no device"),
            }
        })
    }
}

/// Which devices of a backend to use: `all`, or a comma-separated list of
/// [`DeviceSelector`]s (`0,2`, `rusticl`, `0,llvmpipe`), each device once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceList {
    /// Every device the backend lists.
    All,
    /// These devices, in this order.
    Each(Vec<DeviceSelector>),
}

impl Default for DeviceList {
    fn default() -> Self {
        DeviceList::Each(vec![DeviceSelector::default()])
    }
}

impl FromStr for DeviceList {
    type Err = String;

    /// `all`, or selectors separated by commas; an empty list or an empty
    /// member is refused.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("all") {
            return Ok(DeviceList::All);
        }
        let members: Vec<&str> = s.split(',').map(str::trim).collect();
        if members.iter().any(|m| m.is_empty()) {
            return Err(format!(
                "{s:?} is not a list of devices: expected `all`, or indices or names separated by commas"
            ));
        }
        Ok(DeviceList::Each(members.iter().map(|m| DeviceSelector::from_str(m).unwrap_or_default()).collect()))
    }
}

impl std::fmt::Display for DeviceList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceList::All => f.write_str("all"),
            DeviceList::Each(each) => {
                let shown: Vec<String> = each.iter().map(ToString::to_string).collect();
                f.write_str(&shown.join(","))
            }
        }
    }
}

impl DeviceList {
    /// The indices in `devices` this list selects, in its order; an error
    /// naming the devices there are when a member matches none, or when
    /// two members choose one device.
    pub fn positions(&self, devices: &[&DeviceInfo]) -> Result<Vec<usize>, String> {
        let chosen = match self {
            DeviceList::All => (0..devices.len()).collect(),
            DeviceList::Each(each) => each.iter().map(|s| s.position(devices)).collect::<Result<Vec<_>, _>>()?,
        };
        for (i, &a) in chosen.iter().enumerate() {
            if chosen[..i].contains(&a) {
                return Err(format!(
                    "device {a} ({}) is chosen twice; choose each device once",
                    devices.get(a).map_or("", |d| d.name.as_str())
                ));
            }
        }
        if chosen.is_empty() {
            return Err("the backend lists no device".to_string());
        }
        Ok(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::{DeviceList, DeviceSelector};
    use crate::device::{Backend, DeviceInfo};

    fn info(name: &str, platform: &str) -> DeviceInfo {
        DeviceInfo {
            backend: Backend::OpenCl,
            ordinal: 0,
            name: name.into(),
            vendor: String::new(),
            platform: platform.into(),
            total_memory: 0,
            max_threads_per_block: 1,
            max_block_dims: [1; 3],
            max_grid_dims: [1; 3],
            max_blocks: 1,
            shared_memory_per_block: 0,
            compute_units: 1,
            warp_size: 1,
            subgroup_sizes: Vec::new(),
            fp64: false,
            pci_bus_id: None,
            uuid: None,
            arch: None,
        }
    }

    #[test]
    fn devices_are_chosen_by_index_or_by_name_or_platform() {
        let (pocl, rusticl) = (
            info("pthread-haswell-AMD EPYC", "Portable Computing Language"),
            info("llvmpipe (LLVM 15.0.6, 256 bits)", "rusticl"),
        );
        let devices = [&pocl, &rusticl];
        let pick = |s: &str| s.parse::<DeviceSelector>().map(|sel| sel.position(&devices));
        assert_eq!(pick("1"), Ok(Ok(1)));
        assert_eq!(pick(" 0 "), Ok(Ok(0)));
        assert_eq!(pick("LLVMpipe"), Ok(Ok(1)));
        assert_eq!(pick("rusticl"), Ok(Ok(1)));
        assert_eq!(pick("portable"), Ok(Ok(0)));
        let missing = pick("nvidia").map(|r| r.unwrap_err()).unwrap_or_default();
        assert!(missing.contains("\"nvidia\"") && missing.contains("1: llvmpipe"), "{missing}");
        let beyond = pick("2").map(|r| r.unwrap_err()).unwrap_or_default();
        assert!(beyond.contains("no device 2"), "{beyond}");
        assert!(pick("").map(|r| r.is_err()).unwrap_or(false), "an empty name matches nothing");
    }

    #[test]
    fn device_lists_choose_each_device_once() {
        let (a, b) = (info("pthread-haswell", "Portable Computing Language"), info("llvmpipe", "rusticl"));
        let devices = [&a, &b];
        let choose = |s: &str| s.parse::<DeviceList>().and_then(|l| l.positions(&devices));
        assert_eq!(choose("all"), Ok(vec![0, 1]));
        assert_eq!(choose("ALL"), Ok(vec![0, 1]));
        assert_eq!(choose("1,0"), Ok(vec![1, 0]));
        assert_eq!(choose("rusticl, 0"), Ok(vec![1, 0]));
        assert!(choose("0,0").is_err_and(|e| e.contains("chosen twice")));
        assert!(choose("0,llvmpipe,1").is_err_and(|e| e.contains("device 1 (llvmpipe) is chosen twice")));
        assert!(choose("5").is_err_and(|e| e.contains("no device 5") && e.contains("1: llvmpipe")));
        assert!(choose("").is_err() && choose("0,").is_err() && choose(",").is_err());
        assert!("all".parse::<DeviceList>().unwrap_or_default().positions(&[]).is_err());
    }
}
