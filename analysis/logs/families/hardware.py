"""node_failure from the GPU or the node's hardware: the retry must avoid the node.

Sources:
- NVIDIA Xid catalogue, "Analyzing Xid Errors with the Xid Catalog" (docs.nvidia.com/deploy/xid-errors/
  analyzing-xid-catalog.html) and "Dynamic Page Retirement" (docs.nvidia.com/deploy/dynamic-page-retirement):
  each code's mnemonic/meaning and whether NVIDIA's resolution points at the hardware (reset/drain/service) or at
  the application (restart the app). The kernel prints `NVRM: Xid (PCI:0000:3b:00): 79, pid=..., <text>`.
- CUDA runtime API, enum cudaError (docs.nvidia.com/cuda/cuda-runtime-api): cudaErrorECCUncorrectable
  "uncorrectable ECC error encountered", cudaErrorNvlinkUncorrectable (220) "uncorrectable NVLink error detected
  during the execution", cudaErrorNoDevice, cudaErrorDevicesUnavailable; PyTorch prints them as
  `CUDA error: <string>`.
- NVML (nvmlReturn_t NVML_ERROR_GPU_IS_LOST "GPU is lost") and nvidia-smi's "Unable to determine the device
  handle for GPU"; NVRM's "GPU has fallen off the bus" and "RmInitAdapter failed".
- An Xid quoted without the kernel's `NVRM: Xid (PCI:...)` prefix ("GPU 3 hit Xid 79", "XID 48 on node n7"):
  a hardware code of the catalogue right after the word Xid decides; an application code does not.
- NVSwitch: the nvswitch driver's `SXid (PCI:...): N, Fatal, ...` lines and any NVSwitch line saying fatal.
- CUDA runtime cudaErrorSystemNotReady "system not yet initialized" (CUDA_ERROR_SYSTEM_NOT_READY): on NVSwitch
  systems the node's fabric manager is not running, so no job can use this node's GPUs until it is fixed.
- Rule for "CUDA error: unknown error" (cudaErrorUnknown) alone: NOT a hardware fault (a crash, retried on the
  same node); a sick GPU leaves an Xid, ECC, NVLink or bus line that these tables read.
- Linux PCIe AER: "PCIe Bus Error: severity=Uncorrected (Fatal)", "AER: Uncorrected (Fatal) error received".
- DCGM diagnostics failure codes (docs.nvidia.com/datacenter/dcgm, "Diagnostic Errors"): DCGM_FR_* in the
  hardware categories (memory, NVLink, NVSwitch, PCIe, thermal, power).
- AMD GPUs (the Linux amdgpu driver's RAS code, drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c and amdgpu_aca.c): the
  fatal-error interrupt "uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!", the per-block count
  "N uncorrectable hardware errors detected in <block> block", the Accelerator Check Architecture report
  "[Hardware Error]: Accelerator Check Architecture events logged" and the RAS poison lines: the AMD counterparts
  of an Xid or ECC line. Correctable counts ("N correctable hardware errors detected") and an application's GPU page
  fault ("amdgpu: [gfxhub] page fault") are not node faults.
The older needles of analysis.logs.patterns.GPU_FAULT stay there; this table adds the families they missed.
"""

from __future__ import annotations

import re

from analysis.logs.families import rows
from launcher.core.kinds import FailureKind

XID_SOURCE = "NVIDIA Xid catalogue (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"

# code -> (meaning, points at the hardware?). Application-caused codes are listed too, so that a reason can name
# them, but they do not exclude a node: 13/31/43 are the program's own faults (illegal instruction, page fault,
# a channel stopped after an app error), 45 is the driver cleaning up after another Xid (its line names it).
XID_CATALOGUE: dict[int, tuple[str, bool]] = {
    8: ("GPU stopped processing (channel idle timeout)", False),
    13: ("graphics engine exception (application fault)", False),
    31: ("GPU memory page fault (application fault)", False),
    32: ("invalid or corrupted push buffer stream", False),
    38: ("driver firmware error", True),
    43: ("GPU stopped processing (channel reset after an application fault)", False),
    45: ("preemptive cleanup after a previous error", False),
    46: ("GPU stopped processing", True),
    48: ("double-bit ECC error (DBE)", True),
    54: ("auxiliary power is not connected", True),
    56: ("display engine error", True),
    57: ("error programming video memory interface", True),
    58: ("unstable video memory interface detected", True),
    61: ("internal micro-controller breakpoint/warning", True),
    62: ("internal micro-controller halt", True),
    63: ("ECC page retirement or row remapping recording event", True),
    64: ("ECC page retirement or row remapper recording failure", True),
    69: ("graphics engine class error", True),
    74: ("NVLink error", True),
    79: ("GPU has fallen off the bus", True),
    92: ("high single-bit ECC error rate", True),
    94: ("contained ECC error", True),
    95: ("uncontained ECC error", True),
    109: ("context switch timeout", False),
    110: ("security fault error", True),
    119: ("GSP RPC timeout", True),
    120: ("GSP error", True),
    121: ("C2C link error", True),
    122: ("SPI PMU RPC read failure", True),
    123: ("SPI PMU RPC write failure", True),
    124: ("SPI PMU RPC erase failure", True),
    136: ("link training failure", True),
    137: ("NVLink FLA privilege error", True),
    140: ("unrecovered ECC error", True),
    143: ("GPU initialization failure", True),
    144: ("NVLink SAW error", True),
    145: ("NVLink RLW error", True),
    146: ("NVLink TLW error", True),
    147: ("NVLink TREX error", True),
    148: ("NVLink NVLPW error", True),
    149: ("NVLink NETIR error", True),
    150: ("NVLink MSE error", True),
    151: ("key rotation error", True),
    154: ("GPU recovery action changed (reset or reboot required)", True),
    155: ("NVLink software-defined error", True),
    156: ("resource retirement event", True),
    157: ("resource retirement failure", True),
    158: ("GPU fatal timeout", True),
}
HARDWARE_XIDS = frozenset(code for code, (_, hw) in XID_CATALOGUE.items() if hw)
# An Xid line whose code is not in the catalogue still names hardware when its text does.
XID_HARDWARE_WORDS = re.compile(r"(?i)ECC|DBE|NVLink|NVSwitch|PCIe|fallen off|uncorrect|row remap|retire|GSP|"
                                r"power|thermal|C2C|poison|SRAM|DRAM|HBM")

_HW = "GPU hardware fault"
_XID_CODES = "|".join(str(code) for code in sorted(HARDWARE_XIDS, reverse=True))
XID_QUOTED = rf"\b(?:Xid|XID|xid)\b(?:\s+(?:error|code|event)s?)?\s*[:#=]?\s*(?:{_XID_CODES})\b"
GPU_HARDWARE = (
    rows(FailureKind.NODE_FAILURE, _HW, "CUDA runtime API cudaError (cudaErrorNvlinkUncorrectable)",
         ("uncorrectable NVLink error", "RuntimeError: CUDA error: uncorrectable NVLink error detected during the "
                                        "execution"),
         ("cudaErrorNvlinkUncorrectable", "CUDA runtime error: cudaErrorNvlinkUncorrectable"),
         ("CUDA_ERROR_NVLINK_UNCORRECTABLE", "CUDA driver error CUDA_ERROR_NVLINK_UNCORRECTABLE"),
         ("CUDA_ERROR_ECC_UNCORRECTABLE", "cuCtxSynchronize failed: CUDA_ERROR_ECC_UNCORRECTABLE"))
    + rows(FailureKind.NODE_FAILURE, _HW, "NVRM kernel messages / NVML",
           ("RmInitAdapter failed", "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x26:0x65:1482)"),
           ("has fallen off the bus", "NVRM: GPU at PCI:0000:c1:00: GPU has fallen off the bus."),
           ("GPU is lost", "nvmlDeviceGetMemoryInfo: GPU is lost. Reboot the system to recover this GPU"))
    + rows(FailureKind.NODE_FAILURE, _HW + " (AMD RAS)", "Linux amdgpu driver amdgpu_ras.c / amdgpu_aca.c",
           # "uncorrectable hardware error(ERREVENT_...) detected!" and "3 uncorrectable hardware errors detected in
           # umc block"; not "correctable hardware errors" (the needle starts with "un")
           ("uncorrectable hardware error", "amdgpu 0000:c1:00.0: amdgpu: 2 uncorrectable hardware errors detected "
                                            "in umc block"),
           ("Accelerator Check Architecture events logged", "amdgpu 0000:05:00.0: {3}[Hardware Error]: Accelerator "
                                                            "Check Architecture events logged")))
# Shapes: a line that names a GPU link or memory and says it failed uncorrectably.
GPU_HARDWARE_SHAPES = (
    rows(FailureKind.NODE_FAILURE, _HW, "NVIDIA Xid catalogue / DCGM (NVLink and ECC families)",
         ("NVLink", "NVRM: GPU 3: NVLink link 5 is down: fatal error detected on the link",
          r"(?i)nvlink[^\n]{0,120}\b(?:uncorrectable|fatal|is down|link down|failure|failed)\b|"
          r"\b(?:uncorrectable|fatal)\b[^\n]{0,80}nvlink"),
         ("ECC", "GPU 0: uncorrectable ECC errors detected (volatile DBE count 2)",
          r"(?i)\b(?:uncorrectable|double[- ]bit|DBE)\b[^\n]{0,80}\bECC\b|\bECC\b[^\n]{0,80}"
          r"\b(?:uncorrectable|double[- ]bit|DBE)\b"))
    + rows(FailureKind.NODE_FAILURE, _HW, "NVSwitch fatal errors (Xid catalogue, nvswitch driver)",
           ("NVSwitch", "nvswitch: NVSwitch 2 reported a fatal error on link 44; links disabled",
            r"(?i)nvswitch[^\n]{0,120}(?<![-\w])(?:fatal|uncorrectable|is down|failure|failed)\b"),
           ("SXid", "nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
            r"(?i)(?<![-\w])Fatal\b"))
    + rows(FailureKind.NODE_FAILURE, _HW, XID_SOURCE + ", an Xid quoted without the NVRM prefix",
           ("Xid", "GPU 3 on gpu-node-12 hit Xid 79 and the job died", XID_QUOTED),
           ("XID", "DCGM health check: XID 48 reported on GPU 1", XID_QUOTED),
           ("xid", "node drained: xid 74 on gpu 5", XID_QUOTED))
    + rows(FailureKind.NODE_FAILURE, _HW + " (the node's fabric manager is not running)",
           "CUDA runtime API cudaErrorSystemNotReady",
           ("system not yet initialized", "RuntimeError: CUDA error: system not yet initialized",
            r"(?i)\bcuda\b|cudaError|CUDA_ERROR"),
           ("cudaErrorSystemNotReady", "cudaGetDeviceCount returned 802 (cudaErrorSystemNotReady)"),
           ("CUDA_ERROR_SYSTEM_NOT_READY", "cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY"))
    + rows(FailureKind.NODE_FAILURE, _HW, "Linux PCIe AER (drivers/pci/pcie/aer.c)",
           ("PCIe Bus Error", "pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction "
                              "Layer, (Requester ID)", r"(?i)Uncorrected|Fatal"),
           ("AER:", "pcieport 0000:40:01.1: AER: Uncorrected (Fatal) error received: 0000:41:00.0",
            r"(?i)Uncorrected|Fatal"))
    # amdgpu's RAS lines in other wordings: a poisoned page consumed, a fatal RAS error, a RAS-triggered reset
    + rows(FailureKind.NODE_FAILURE, _HW + " (AMD RAS)", "Linux amdgpu driver amdgpu_ras.c / amdgpu_umc.c",
           ("amdgpu", "amdgpu 0000:8a:00.0: amdgpu: RAS poison consumption detected in gfx block, GPU reset",
            r"(?i)\bamdgpu\b[^\n]{0,200}(?:\bpoison\w*|\bRAS\b[^\n]{0,60}\b(?:fatal|uncorrect\w*)|"
            r"\[Hardware Error\][^\n]{0,80}\b(?:uncorrect\w*|fatal)\b)"))
    + rows(FailureKind.NODE_FAILURE, _HW, "DCGM diagnostics failure codes (DCGM_FR_*)",
           ("DCGM_FR_", "dcgmi diag: DCGM_FR_NVLINK_ERROR_CRITICAL: Detected 3 NVLink CRC errors on GPU 2",
            r"DCGM_FR_\w*(?:DBE|ECC|NVLINK|NVSWITCH|PCI|ROW_REMAP|RETIRED|UNCONTAINED|XID|THERMAL|POWER|"
            r"FALLEN|GPU_LOST|SRAM)\w*")))
