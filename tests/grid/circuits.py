"""Small OpenDSS circuits the control tests share: the time-mode comparisons
(``test_regcontrol_time_mode.py``, ``test_capcontrol_time_mode.py``) and the static-mode ones
(``test_static_controls.py``), each without controls; a test adds its own."""

ONE_PHASE = """clear
new circuit.case basekv=12.47 pu=1.0 angle=0 phases=3 mvasc3=200000 mvasc1=200000
new line.feed bus1=sourcebus.1.2.3 bus2=a.1.2.3 phases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.8 c1=0 c0=0 length=1 units=km
new transformer.reg1 phases=1 windings=2 buses=[a.1 b.1] conns=[wye wye] kvs=[7.2 7.2] kvas=[5000 5000] xhl=0.01 %loadloss=0.001 ppm=0
new line.out bus1=b.1 bus2=c.1 phases=1 r1=0.1 x1=0.2 r0=0.1 x0=0.2 c1=0 c0=0 length=1 units=km
new load.ld bus1=c.1 phases=1 kv=7.2 kw=400 kvar=120 model=1 vminpu=0.7 vmaxpu=1.3
new load.gen bus1=c.1 phases=1 kv=7.2 kw=-1500 kvar=0 model=1 vminpu=0.7 vmaxpu=1.3
set voltagebases=[12.47]
calcvoltagebases
"""
"""A single-phase regulator between a feeding line and a load; ``gen`` (a negative load) can turn
the power flow around."""

THREE_PHASE = """clear
new circuit.case basekv=12.47 pu=1.0 angle=0 phases=3 mvasc3=200000 mvasc1=200000
new line.feed bus1=sourcebus.1.2.3 bus2=a.1.2.3 phases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.8 c1=0 c0=0 length=1 units=km
new transformer.reg3 phases=3 windings=2 buses=[a.1.2.3 b.1.2.3] conns=[wye wye] kvs=[12.47 12.47] kvas=[10000 10000] xhl=0.01 %loadloss=0.001 ppm=0
new line.out bus1=b.1.2.3 bus2=c.1.2.3 phases=3 r1=0.2 x1=0.4 r0=0.5 x0=1.2 c1=0 c0=0 length=2 units=km
new load.la bus1=c.1 phases=1 kv=7.2 kw=1200 kvar=400 model=1 vminpu=0.7 vmaxpu=1.3
new load.lb bus1=c.2 phases=1 kv=7.2 kw=300 kvar=100 model=1 vminpu=0.7 vmaxpu=1.3
new load.lc bus1=c.3 phases=1 kv=7.2 kw=700 kvar=200 model=1 vminpu=0.7 vmaxpu=1.3
set voltagebases=[12.47]
calcvoltagebases
"""
"""A ganged three-phase regulator feeding unbalanced single-phase loads."""

LINE = """clear
new circuit.case basekv=12.47 pu=1.03 angle=0 phases=3 mvasc3=200000 mvasc1=200000
new line.feed bus1=sourcebus.1.2.3 bus2=a.1.2.3 phases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.8 c1=0 c0=0 length=2 units=km
new line.l2 bus1=a.1.2.3 bus2=b.1.2.3 phases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.8 c1=0 c0=0 length=1 units=km
new load.ld bus1=b.1.2.3 phases=3 kv=12.47 kw=1000 kvar=500 model=1 vminpu=0.7 vmaxpu=1.3
new capacitor.c1 bus1=b.1.2.3 phases=3 kv=12.47 kvar=1200
set voltagebases=[12.47]
calcvoltagebases
"""
"""A 1200 kvar bank at the end of a line, beside a load that steps between 1000 kW (the voltage at
the bank 124 V on the 120 V base with the bank in, 122.2 V without) and 6000 kW (116.4 V in,
114.7 V out)."""
