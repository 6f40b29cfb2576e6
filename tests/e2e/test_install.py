"""make install's layout works: CLI, library, package and .pth autostart."""
import os
import subprocess

from conftest import BUILD, ROOT, SYSTEM_PYTHON, agent_lib, agent_listening, wait_for


def test_install_into_a_site_dir_and_autostart(tmp_path):
    prefix, site = tmp_path / "prefix", tmp_path / "site"
    subprocess.run([os.path.join(ROOT, "scripts", "install"), BUILD, str(prefix),
                    "/usr/bin/python3"], cwd=ROOT, check=True,
                   env=dict(os.environ, SITE=str(site)), capture_output=True)
    cli = prefix / "bin" / "probing"
    lib = os.path.basename(agent_lib(SYSTEM_PYTHON))    # libprobing-cpXY.so
    assert cli.exists() and (prefix / "lib" / "probing" / lib).exists()
    assert (site / "probing" / lib).exists()
    assert (site / "probing.pth").exists() and (site / "probing" / "__init__.py").exists()
    # The bash completion, where bash-completion looks (by command name).
    comp = prefix / "share" / "bash-completion" / "completions" / "probing"
    r = subprocess.run(["bash", "-c", 'source "$1"; complete -p probing', "sh", str(comp)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "-F _probing probing" in r.stdout, r
    # A site dir processes .pth files: PROBING=1 starts the agent with no
    # change to the program.
    code = ("import site, sys, time; site.addsitedir(sys.argv[1]); "
            "print('READY', flush=True); time.sleep(60)")
    env = dict(os.environ, PROBING="1")
    if os.environ.get("PROBING_TARGET_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]  # ASan build
    p = subprocess.Popen(["/usr/bin/python3", "-c", code, str(site)],
                         env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        wait_for(lambda: agent_listening(p.pid), 20, "agent")
        r = subprocess.run([str(cli), "-t", str(p.pid), "eval", "import probing; probing.__file__"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r
        assert str(site) in r.stdout
    finally:
        p.kill()
        p.wait()
    # without PROBING the .pth does nothing
    r = subprocess.run(["/usr/bin/python3", "-c",
                        "import site, sys; site.addsitedir(sys.argv[1]); print('probing' in sys.modules)",
                        str(site)], capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "PROBING"})
    assert r.stdout.strip() == "False"


def test_default_install_covers_every_interpreter_of_a_built_version(tmp_path):
    """`make install` with no Python named: every CPython on the machine of
    a version the build has an agent for — the python3 first on PATH
    included (pyenv's 3.11.7 here, which is not the build's) — each
    site-packages once, and the others named as skipped."""
    import shutil
    dest = tmp_path / "dest"
    r = subprocess.run([os.path.join(ROOT, "scripts", "install"), BUILD, "/usr/local"],
                       cwd=ROOT, env=dict(os.environ, DESTDIR=str(dest)),
                       capture_output=True, text=True)
    assert r.returncode == 0, r
    pythons = [line.split()[2] for line in open(os.path.join(BUILD, "pythons.txt"))]
    first = shutil.which("python3")
    if first:
        pythons.append(first)
    probe = ("import sys, sysconfig; print('%d%d%s' % (sys.version_info[:2] + "
             "('t' if 't' in getattr(sys, 'abiflags', '') else '',)), "
             "sysconfig.get_paths()['purelib'], sys.executable)")
    for py in pythons:
        tag, site, exe = subprocess.run([py, "-c", probe], capture_output=True,
                                        text=True, check=True).stdout.split()
        lib = "libprobing-cp%s.so" % tag
        if not os.path.exists(os.path.join(BUILD, "agent", lib)):
            continue
        assert (dest / site.lstrip("/") / "probing" / lib).exists(), (py, r.stdout)
        assert (dest / site.lstrip("/") / "probing.pth").exists(), (py, r.stdout)
        assert "installed: %s/probing (%s)" % (site, exe) in r.stdout, (py, r.stdout)
    # Each site once, whatever names its interpreter has.
    sites = [line.split()[1] for line in r.stdout.splitlines()
             if line.startswith("installed: ") and line.endswith(")")]
    assert len(sites) == len(set(sites)), r.stdout
