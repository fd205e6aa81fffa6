"""The offline verifier: `python -m tombstones.verify RECEIPT KEYS.json`.

Needs neither the database nor the network (no Django is imported): the receipt the subject kept (the file
their mail attached, a bundle of receipts, or one receipt) and the published key set (`/.well-known/tombstone-keys.json`, saved). Exit status 0 only when every check
passes (and, when content is given, it is covered); 1 when a check fails; 2 when the files cannot be read.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .jwk import jwks_parse
from .plain import tombstone_words
from .receipt import json_parse
from .verification import verify_receipt

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("receipt", type=Path, help="the receipt file you were mailed (JSON: a bundle or one receipt)")
    parser.add_argument("keys", type=Path, help="the published key set (JWKS JSON)")
    parser.add_argument("--other-checkpoint", type=Path,
                        help="another checkpoint of the same log (an earlier one you kept, or the latest)")
    parser.add_argument("--consistency-proof", type=Path,
                        help="the consistency proof between the two checkpoints (JSON from /api/v1/log/consistency)")
    parser.add_argument("--content-file", type=Path, help="a piece of your data, to check that it is covered")
    parser.add_argument("--salt", help="the salt for --content-file (default: every salt in the receipt)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tombstones.verify", description=__doc__.split("\n\n")[0],
                                     epilog="How each check is computed: docs/verification-spec.md (/verify/spec).")
    add_arguments(parser)
    return run(parser.parse_args(argv), out=sys.stdout)


def run(args: argparse.Namespace, *, out) -> int:
    """Verify as `args` say (the options of `add_arguments`), print the report to `out`, return the exit status."""
    try:
        keys = jwks_parse(json_parse(_read(args.keys)))
        receipt = _read(args.receipt)
        other = _read(args.other_checkpoint) if args.other_checkpoint else None
        proof = None
        if args.consistency_proof:
            proof = json_parse(_read(args.consistency_proof))
            proof = proof.get("hashes") if isinstance(proof, dict) else proof
        content = _read(args.content_file) if args.content_file else None
    except (OSError, ValueError) as exc:
        out.write(f"cannot verify: {exc}\n")
        return EXIT_UNUSABLE
    if (other is None) != (proof is None):
        out.write("cannot verify: --other-checkpoint and --consistency-proof go together\n")
        return EXIT_UNUSABLE
    report = verify_receipt(receipt, keys, other_checkpoint=other, consistency_proof=proof,
                            content=content, salt=args.salt)
    if args.json:
        out.write(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        for check in report.checks:
            out.write(f"{'ok  ' if check['passed'] else 'FAIL'} {check['check']}\n")
        out.write(f"{report.code}: {report.message}\n")
        for n, item in enumerate(report.items or [report], 1):
            if item.summary:  # what each genuine tombstone records, in the page's words
                words = tombstone_words(item.summary)
                out.write(f"tombstone {words['tombstone_id']} ({n} of {len(report.items or [report])}), "
                          f"{words['when']}: {words['records']}"
                          + (f" {words['derived']}" if words["derived"] else "") + f" {words['deferred']}\n")
        if report.coverage:
            out.write(f"content: {report.coverage.message}\n")
    ok = report.genuine and (report.coverage is None or report.coverage.covered)
    return EXIT_OK if ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
