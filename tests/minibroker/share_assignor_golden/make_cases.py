"""Writes cases.txt for SimpleAssignorGolden.java: random share-group assignor inputs, a third
each homogeneous on one topic, heterogeneous, and homogeneous on up to three topics, with
previous assignments (some holding partitions no longer assignable) and assignable subsets.
Seeded, so a rerun writes the same file: python3 make_cases.py (in this directory)."""
import random
rng = random.Random(932)
lines = []
def member_line(name, subs, old):
    o = "+".join(f"{t}/{'.'.join(map(str, sorted(ps)))}" for t, ps in sorted(old.items()) if ps)
    return f"{name}:{'.'.join(map(str, sorted(subs)))}:{o}"
for i in range(600):
    kind = i % 3  # 0: homogeneous one topic (exact), 1: heterogeneous (exact), 2: homogeneous many topics
    ntopics = 1 if kind == 0 else rng.randint(1, 3)
    topics = {t: rng.randint(1, 16) for t in rng.sample(range(1, 9), ntopics)}
    nm = rng.randint(1, 20)
    names = rng.sample([f"m{j}" for j in range(40)], nm)
    allsubs = set(topics)
    members = []
    for n in names:
        if kind == 1:
            subs = set(rng.sample(sorted(topics), rng.randint(1, len(topics)))) if rng.random() > 0.1 else set()
        else:
            subs = allsubs
        old = {}
        if rng.random() < 0.6:
            for t in rng.sample(sorted(topics), rng.randint(0, len(topics))):
                old[t] = set(rng.sample(range(topics[t]), rng.randint(0, topics[t])))
        members.append((n, subs, old))
    if kind == 1 and len({frozenset(s) for _, s, _ in members}) == 1:
        members[0] = (members[0][0], set(), members[0][2])
    if rng.random() < 0.3:
        assignable = {t: set(rng.sample(range(c), rng.randint(0, c))) for t, c in topics.items() if rng.random() < 0.8}
        a = ";".join(f"{t}:{'.'.join(map(str, sorted(ps)))}" for t, ps in sorted(assignable.items()))
    else:
        a = "*"
    typ = "X" if kind == 1 else "H"
    lines.append(f"{typ}|{','.join(f'{t}:{c}' for t, c in topics.items())}|{a}|" + ";".join(member_line(*m) for m in members))
open("cases.txt", "w").write("\n".join(lines) + "\n")
