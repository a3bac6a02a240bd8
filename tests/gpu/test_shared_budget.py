"""Two Python processes on one GPU, one torch and one CuPy, draw on one
budget (the same key): the second is refused while the first holds, and
admitted once it frees.  Each one's tree shows its own blocks by tag, read
from outside through its FUSE mount where /dev/fuse works, else reported by
the process from xdm.tree.
"""

import os

from conftest import Child

LIMIT = 256 << 20
HOLD = 192 << 20    # torch's tensor
WANT = 128 << 20    # CuPy's array: fits the limit, not beside torch's

MOUNT = '''
def try_mount(directory):
    try:
        xdm.mount(directory)
        return directory
    except (xdm.XdmError, OSError) as e:
        print("no mount: %s" % e, file=sys.stderr)
        return None
'''

TORCH = MOUNT + '''
import xdm.torch
xdm.torch.use(stack=os.environ["TEST_STACK"], ordinal=0)
import torch
mounted = try_mount(os.environ["TEST_MOUNT"])
with xdm.tag("torch-holds"):
    x = torch.ones(%d, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
report("HELD", mount=mounted, tags=tagged(), used=int(xdm.tree.show("0/budget/used")))
sys.stdin.readline()
del x
torch.cuda.synchronize()
report("FREED", tags=tagged(), used=int(xdm.tree.show("0/budget/used")))
sys.stdin.readline()
''' % HOLD

CUPY = MOUNT + '''
import cupy, xdm.cupy
xdm.cupy.use(0)
mounted = try_mount(os.environ["TEST_MOUNT"])

def want():
    with xdm.tag("cupy-wants"):
        y = cupy.ones(%d, dtype=cupy.uint8)
    cupy.cuda.runtime.deviceSynchronize()
    return y

try:
    want()
    refused = None
except xdm.OutOfBudget as e:
    refused = {"message": str(e), "requested": e.requested, "remaining": e.remaining,
               "cupy_oom": isinstance(e, cupy.cuda.memory.OutOfMemoryError)}
report("REFUSED", refused=refused, tags=tagged())
sys.stdin.readline()
y = want()
report("ADMITTED", mount=mounted, tags=tagged(), total=int(y.sum()),
       used=int(xdm.tree.show("0/budget/used")))
sys.stdin.readline()
''' % WANT


def mount_tags(directory):
    """Bytes by tag of runtime 0's live blocks, read through a FUSE mount."""
    blocks = os.path.join(directory, "0", "blocks")
    out = {}
    for gen in os.listdir(blocks):
        with open(os.path.join(blocks, gen, "tag")) as f:
            tag = f.read().strip()
        with open(os.path.join(blocks, gen, "bytes")) as f:
            out[tag] = out.get(tag, 0) + int(f.read())
    return out


def test_torch_and_cupy_share_one_budget(budget_key, config_file, tmp_path):
    stack = "budget key=%s limit=%d | pool | cuda_async" % (budget_key, LIMIT)
    torch_env = {"TEST_STACK": stack, "TEST_MOUNT": str(tmp_path / "torch")}
    cupy_env = {"XDM_CONFIG": config_file(stack), "TEST_MOUNT": str(tmp_path / "cupy")}
    holder = Child(TORCH, torch_env)
    asker = None
    try:
        held = holder.expect("HELD")
        print("torch's tree read through:", held["mount"] or "xdm.tree (no mount)")
        assert held["tags"].get("torch-holds", 0) >= HOLD, held
        assert held["used"] >= HOLD
        if held["mount"]:
            # The same, seen from outside the process.
            assert mount_tags(held["mount"]).get("torch-holds", 0) >= HOLD

        asker = Child(CUPY, cupy_env)
        refused = asker.expect("REFUSED")
        r = refused["refused"]
        assert r is not None, "CuPy got %d bytes beside torch's %d under %d" % (
            WANT, HOLD, LIMIT)
        assert r["requested"] >= WANT and r["remaining"] < WANT, r
        assert "bytes requested" in r["message"], r
        assert r["cupy_oom"], "the refusal is not CuPy's OutOfMemoryError"
        assert "cupy-wants" not in refused["tags"]

        holder.send("free")
        freed = holder.expect("FREED")
        assert "torch-holds" not in freed["tags"], freed

        asker.send("retry")
        admitted = asker.expect("ADMITTED")
        print("CuPy's tree read through:", admitted["mount"] or "xdm.tree (no mount)")
        print("refusal:", r["message"])
        assert admitted["total"] == WANT
        assert admitted["tags"].get("cupy-wants", 0) >= WANT, admitted
        assert "torch-holds" not in admitted["tags"]
        if admitted["mount"]:
            seen = mount_tags(admitted["mount"])
            assert seen.get("cupy-wants", 0) >= WANT, seen
        holder.send("exit")
        asker.send("exit")
        holder.finish()
        asker.finish()
    finally:
        holder.kill()
        if asker is not None:
            asker.kill()
