"""Virtualisation evidence: DMI strings and cpuinfo flags through the real probe (files in a temporary root)."""

from __future__ import annotations

import pytest

from servelab.diagnose.nvml_queries import _cuda_version
from servelab.diagnose.probe import RealProbe
from servelab.diagnose.virt import VirtInfo, read_virt, virt_findings


def write(root, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_dmi_and_cpuinfo_are_read_from_the_machine(tmp_path):
    write(tmp_path, "/sys/class/dmi/id/sys_vendor", "Microsoft Corporation\n")
    write(tmp_path, "/sys/class/dmi/id/product_name", "Virtual Machine\n")
    write(
        tmp_path,
        "/proc/cpuinfo",
        "processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor lahf_lm\n\nprocessor\t: 1\n",
    )
    virt = read_virt(RealProbe(root=str(tmp_path)))
    assert (virt.sys_vendor, virt.product_name, virt.cpu_hypervisor_flag) == (
        "Microsoft Corporation",
        "Virtual Machine",
        True,
    )
    assert virt.dmi_says_vm and virt.in_vm


@pytest.mark.parametrize(
    ("virt", "in_vm", "in_container"),
    [
        (
            VirtInfo(detect_virt="none", sys_vendor="ASUSTeK COMPUTER INC.", cpu_hypervisor_flag=False),
            False,
            False,
        ),
        (VirtInfo(detect_virt="kvm"), True, False),
        (VirtInfo(detect_virt="lxc", sys_vendor="Supermicro", cpu_hypervisor_flag=False), False, True),
        (VirtInfo(detect_virt="docker", sys_vendor="Amazon EC2"), True, True),
        (VirtInfo(nvml_virtualization=("passthrough",)), True, False),
        (VirtInfo(sys_vendor="Microsoft Corporation", product_name="Surface Laptop"), False, False),
    ],
)
def test_vm_and_container_classification(virt, in_vm, in_container):
    assert (virt.in_vm, virt.in_container) == (in_vm, in_container)


def test_vm_is_a_warning_only_with_two_gpus():
    vm = VirtInfo(detect_virt="kvm")
    assert [f.severity for f in virt_findings(vm, 2)] == ["warning"]
    assert [f.severity for f in virt_findings(vm, 1)] == ["info"]
    assert virt_findings(VirtInfo(detect_virt="none", cpu_hypervisor_flag=False), 4) == []


def test_cuda_driver_version_from_nvml_integer():
    assert (
        _cuda_version(12040) == "12.4" and _cuda_version(13030) == "13.3" and _cuda_version(11080) == "11.8"
    )
