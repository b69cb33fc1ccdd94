from minibroker.cluster import Cluster


def test_preferred_election_moves_leadership_back_and_bumps_the_epoch():
    epochs = []
    c = Cluster([1, 2, 3])
    c.on_epoch = lambda t, p, e: epochs.append((t, p, e))
    c.set_replication("t", 3)
    c.observe("t", 1)
    first = c.replicas("t", 0)[0]
    assert c.elect("t", 0, preferred=True) == "not_needed"
    c.stop(first)
    assert c.leader("t", 0) != first and epochs == [("t", 0, 1)]
    assert c.elect("t", 0, preferred=True) == "preferred_unavailable"
    c.start(first)
    assert c.leader("t", 0) != first  # leadership stays where it moved
    assert c.elect("t", 0, preferred=True) == "elected"
    assert c.leader("t", 0) == first and epochs[-1] == ("t", 0, 2)
    assert c.elect("t", 0, preferred=False) == "not_needed"


def test_unclean_election_without_a_live_replica():
    c = Cluster([1, 2])
    c.observe("t", 1)
    only = c.replicas("t", 0)[0]
    other = 2 if only == 1 else 1
    c.stop(only)
    assert c.leader("t", 0) is None
    assert c.elect("t", 0, preferred=False) == "no_eligible_leader"
    c.start(only)
    assert c.elect("t", 0, preferred=False) == "not_needed" and other != only
