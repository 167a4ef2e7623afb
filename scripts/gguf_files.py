"""What the synthetic GGUF generators share: the command line entry and the atomic write."""
import os
import sys


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


def main(parse_args, build, argv=None):
    """parse_args(argv) -> (out, cfg); writes `out` with build(path, cfg). Returns the exit code."""
    out, cfg = parse_args(sys.argv[1:] if argv is None else argv)
    write_atomically(out, build, cfg)
    return 0


def write_and_close(w):
    """Writes what the GGUFWriter `w` holds (keys, then tensors) and closes it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
