# Sourced by the shell tests: how a test that lacks a dependency ends. Outside CI it is skipped
# (exit 77, CTest's SKIP_RETURN_CODE) with the reason; in CI (CI=true), where the README says every
# dependency is installed, it fails with the reason instead of passing unseen.
# usage: skip_or_fail "REASON"
skip_or_fail() {
    echo "$1"
    case "${CI:-}" in
        true | TRUE | True | 1)
            echo "FAIL: in CI (CI=$CI) a missing dependency fails the test instead of skipping it"
            exit 1
            ;;
    esac
    echo "SKIP"
    exit 77
}
