"""Fits the memory planner's coefficients (runner::memory::estimate) to the
peaks `seqlab bench memory --json` measured (benchmarks/planner-fit.sh).

estimate = 4 bytes x (c_param * params + c_part * parts * params
                      + c_rec * recurrent + c_att * attention + c_scores * scores)
with the float counts each cell reports; `parts` is how many parts the
training step cuts the batch into (each part holds a gradient of every
parameter until they are summed): the cell's "parts", or on the CPU
backends max(1, batch // 16). Non-negative least squares on the
relative error (every subset of the coefficients tried, the best feasible
one kept), then every coefficient raised by the factor that makes the
largest underestimate at most MARGIN (the second argument, default 0;
benchmarks/planner-fit.sh uses 0.2). Prints the
coefficients and each cell's estimate/measured ratio, and the error band.
Standard library only."""
import itertools
import json
import sys

NAMES = ["params", "parts", "recurrent", "attention", "scores"]


def rows(path):
    out = []
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        v = json.loads(line)
        if "error" in v:
            print("skipped (failed):", line, file=sys.stderr)
            continue
        f = v["floats"]
        parts = v.get("parts", max(1, v["batch"] // 16))
        x = [4.0 * v["params"], 4.0 * parts * v["params"], 4.0 * f["recurrent"], 4.0 * f["attention"], 4.0 * f["scores"]]
        out.append((v, x, float(v["peak_bytes"])))
    return out


def solve(a, b):
    """Least squares by the normal equations (small, well-scaled systems)."""
    n = len(a[0])
    m = [[sum(r[i] * r[j] for r in a) for j in range(n)] + [sum(r[i] * y for r, y in zip(a, b))] for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda k: abs(m[k][i]))
        m[i], m[p] = m[p], m[i]
        if abs(m[i][i]) < 1e-300:
            return None
        for k in range(n):
            if k != i:
                f = m[k][i] / m[i][i]
                m[k] = [x - f * y for x, y in zip(m[k], m[i])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(data):
    # Relative error: divide each row by its measurement.
    a = [[xi / y for xi in x] for _, x, y in data]
    b = [1.0] * len(data)
    best = None
    n = len(NAMES)
    for k in range(1, n + 1):
        for subset in itertools.combinations(range(n), k):
            sol = solve([[r[i] for i in subset] for r in a], b)
            if sol is None or any(c < 0 for c in sol):
                continue
            c = [0.0] * n
            for i, v in zip(subset, sol):
                c[i] = v
            err = sum((sum(ci * xi for ci, xi in zip(c, r)) - 1.0) ** 2 for r in a)
            if best is None or err < best[0]:
                best = (err, c)
    return best[1]


def main():
    path = sys.argv[1]
    margin = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    data = rows(path)
    c = fit(data)
    ratio = lambda c, x, y: sum(ci * xi for ci, xi in zip(c, x)) / y
    lowest = min(ratio(c, x, y) for _, x, y in data)
    raise_by = max(1.0, (1.0 - margin) / lowest)
    c = [ci * raise_by for ci in c]
    print(f"{len(data)} cells; raised by {raise_by:.3f}")
    for name, ci in zip(NAMES, c):
        print(f"  {name:<9} {ci:.4f}")
    ratios = []
    for v, x, y in data:
        r = ratio(c, x, y)
        ratios.append(r)
        print(f"{v['encoder']:<22} batch {v['batch']:>3} L {v['seq_len']:>5}: estimate {r * y / 2**20:9.0f} MiB, "
              f"measured {y / 2**20:9.0f} MiB, ratio {r:.2f}")
    print(f"every measured peak within {100 * (1 / max(ratios) - 1):+.0f}% … {100 * (1 / min(ratios) - 1):+.0f}% "
          f"of its estimate (estimate/measured {min(ratios):.2f} … {max(ratios):.2f})")


if __name__ == "__main__":
    main()
