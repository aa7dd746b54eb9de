"""(docs/BENCHMARKS.md, "Loading without a copy") Runs a command, polls /proc/PID/status every 5 ms, prints the peak VmHWM, RssAnon, RssFile (MiB) and wall time."""
import subprocess, sys, time
def status(pid):
    try:
        d = {}
        for l in open(f"/proc/{pid}/status"):
            k, _, v = l.partition(":")
            if k in ("VmHWM", "RssAnon", "RssFile"):
                d[k] = int(v.split()[0]) / 1024
        return d
    except OSError:
        return None
t0 = time.time()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
peak = {"VmHWM": 0, "RssAnon": 0, "RssFile": 0}
while p.poll() is None:
    d = status(p.pid)
    if d:
        for k, v in d.items():
            peak[k] = max(peak[k], v)
    time.sleep(0.005)
wall = time.time() - t0
out = p.stdout.read()
keep = [l for l in out.splitlines() if l.startswith(("model:", "prefill:", "decode:", "weights:", "memory:", "llama:", "load"))]
print("\n".join(keep))
print(f"polled: peak VmHWM {peak['VmHWM']:.0f} MiB, peak RssAnon {peak['RssAnon']:.0f} MiB, peak RssFile {peak['RssFile']:.0f} MiB, wall {wall:.2f} s, rc {p.returncode}")
