"""Put on the tests' subprocesses' PYTHONPATH by benchmarks/mutation.py (docs/mutation.md).

While mutmut maps tests to functions ("stats"), the mutated package's trampolines in a `recipe ...`
subprocess record each function they pass through here, not in mutmut's own tables (which die with
the subprocess, and whose settings a subprocess started in another folder cannot find). At exit
the names go to a file in MUTATION_HITS; benchmarks/mutation_session.py adds them to the
test that started the subprocess, so that its mutants are run against that test."""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    folder = os.environ.get("MUTATION_HITS")
    if not folder:  # no folder to report to: run the original code, as if no mutant were active
        os.environ["MUTANT_UNDER_TEST"] = ""
    else:
        import atexit

        from mutmut.mutation import trampoline

        hits: set[str] = set()

        def record(name, caller=None):
            hits.add(name)

        def report():
            if hits:
                path = os.path.join(folder, f"{os.getpid()}.hits")
                with open(path + ".tmp", "w", encoding="utf-8") as f:
                    f.write("\n".join(sorted(hits)))
                os.replace(path + ".tmp", path)  # the plugin never reads half a file

        trampoline.record_trampoline_hit = record
        atexit.register(report)
