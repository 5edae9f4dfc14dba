"""Load management: reports, placement, shedding and bundle split (Pulsar's load manager).

* ``config.py``    -- LoadBalancerConfig: the ``loadBalancer*`` keys, typed.
* ``data.py``      -- LoadReport (LocalBrokerData), BundleLoad, Decision.
* ``placement.py`` -- isolation policies, anti-affinity, least loaded with weights.
* ``shedder.py``   -- ThresholdShedder and the moves of one round.
* ``split.py``     -- automatic bundle split and the split algorithms.
* ``api.py``       -- the pluggable LoadManager interface.
* ``reporter.py``  -- this broker's load report (I/O: the process, the topics).
* ``manager.py``   -- the leader-based load manager (I/O: metadata store, unloads).

The first five are pure decision logic (no I/O, no clock): the simulation in
``tests/simulation/test_load_simulation.py`` drives them over many brokers.
"""
