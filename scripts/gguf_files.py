"""What the synthetic GGUF generators share: writing a file atomically."""
import os


def write_atomically(out, build, cfg):
    """Calls build(tmp_path, cfg), then renames tmp_path to `out`; removes tmp_path on any failure."""
    tmp = out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    try:
        build(tmp, cfg)
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
