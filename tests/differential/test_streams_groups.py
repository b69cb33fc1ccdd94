

@pytest.mark.timeout(180)
def test_session_timeout_fences_a_silent_member(differential_pair):
    """A member that stops heartbeating is fenced after streams.session.timeout.ms (45 s, the
    smallest Kafka 4.4 allows); the one left gets its tasks. One wait serves both brokers."""
    sc = Script(differential_pair, 1, internal_topics_exist=True)
    a, b = "member-a-" + uuid.uuid4().hex[:6], "member-b-" + uuid.uuid4().hex[:6]
    ea = sc.hb("a joins", a, 0, topology=sc.topology())[2]
    eb = sc.hb("b joins", b, 0, topology=sc.topology(), process=str(uuid.uuid4()))[2]
    epochs = {s.name: ea for s in differential_pair.sides}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # only a heartbeats, for 50 s (bounded by the deadline)
        for s in differential_pair.sides:
            r = sc.call(s, sc.hb_request(a, epochs[s.name], owned=[]))
            assert r.error_code == 0, (s.name, r.error_message)
            epochs[s.name] = r.member_epoch
        if time.monotonic() > deadline - 10:
            break
        time.sleep(2)
    for s in differential_pair.sides:
        g = sc.call(s, req(DESCRIBE, 1, group_ids=(sc.app,), include_authorized_operations=False,
                           include_topology_description=False)).groups[0]
        assert [m.member_id for m in g.members] == [a], (s.name, g)
    sc.hb("b, fenced, heartbeats", b, eb)
    sc.until_assigned(a, epochs["kafka"], 4) if epochs["kafka"] == epochs["minibroker"] else None
