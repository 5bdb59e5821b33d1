"""Geography: great-circle distance, geohash and S2 cells.

``Distance`` is pure Spark SQL. ``GeoHash`` (pygeohash, C implementation) and the S2 functions (Google's
``s2geometry`` bindings) are vectorized over Arrow batches: one Python call per batch, a library call per value.
"""

from __future__ import annotations

import math

import pyarrow as pa

from udfs.declare import Example, arrow_function, rows, sql_function

EARTH_RADIUS_KM = 6371.0
_TOTAL_EARTH_AREA_KM2 = 510072000  # Dagger's constant for S2AreaInKm2
_U64 = (1 << 64) - 1


@sql_function(
    "Distance",
    "lat1 DOUBLE, lon1 DOUBLE, lat2 DOUBLE, lon2 DOUBLE",
    "DOUBLE",
    examples=[
        Example("SELECT round(Distance(-6.2088, 106.8456, -6.9175, 107.6191), 3)", [(116.236,)]),
        Example("SELECT Distance(0.0, 0.0, 0.0, 1.0)", [(111.19492664455873,)]),
    ],
)
def distance() -> str:
    """Haversine distance in kilometres between two points given in degrees (Earth radius 6371 km)."""
    return (
        f"2 * {EARTH_RADIUS_KM} * asin(sqrt(pow(sin(radians(lat2 - lat1) / 2), 2)"
        " + cos(radians(lat1)) * cos(radians(lat2)) * pow(sin(radians(lon2 - lon1) / 2), 2)))"
    )


@arrow_function(
    "GeoHash",
    "latitude DOUBLE, longitude DOUBLE, length INT",
    "STRING",
    examples=[
        Example("SELECT GeoHash(57.64911, 10.40744, 11)", [("u4pruydqqvj",)]),
        Example("SELECT GeoHash(-6.2, 106.8, 6)", [("qqguwr",)]),
    ],
)
def geohash(latitude: pa.Array, longitude: pa.Array, length: pa.Array) -> pa.Array:
    """The geohash of a point with ``length`` characters (1-12)."""
    import pygeohash

    out = []
    for lat, lon, n in rows(latitude, longitude, length):
        if lat is None or lon is None or n is None:
            out.append(None)
            continue
        if not 1 <= n <= 12:
            raise ValueError(f"GeoHash: length must be between 1 and 12, got {n}")
        out.append(pygeohash.encode(lat, lon, n))
    return pa.array(out, pa.string())


@arrow_function(
    "S2Id",
    "latitude DOUBLE, longitude DOUBLE, level INT",
    "STRING",
    examples=[
        Example("SELECT S2Id(-6.2, 106.8, 13)", [("3344475485613588480",)]),
        Example("SELECT S2Id(40.7128, -74.006, 30)", [("-8520148442738587287",)]),
    ],
    notes="The id is printed as a signed 64-bit decimal, as Dagger's Java ``Long.toString`` prints it (cells on "
    "faces 4 and 5 are negative).",
)
def s2_id(latitude: pa.Array, longitude: pa.Array, level: pa.Array) -> pa.Array:
    """The id of the S2 cell at ``level`` (0-30) containing the point, as a decimal string."""
    import s2geometry as s2

    out = []
    for lat, lon, lvl in rows(latitude, longitude, level):
        if lat is None or lon is None or lvl is None:
            out.append(None)
            continue
        if not 0 <= lvl <= 30:
            raise ValueError(f"S2Id: level must be between 0 and 30, got {lvl}")
        cell = s2.S2CellId(s2.S2LatLng.FromDegrees(lat, lon)).parent(lvl).id()
        out.append(str(cell - (1 << 64) if cell >= 1 << 63 else cell))
    return pa.array(out, pa.string())


@arrow_function(
    "S2AreaInKm2",
    "s2id STRING",
    "DOUBLE",
    examples=[Example("SELECT round(S2AreaInKm2('3344475485613588480'), 6)", [(1.481565,)])],
)
def s2_area_in_km2(s2id: pa.Array) -> pa.Array:
    """Area in km² of the S2 cell with that (signed decimal) id, as Dagger computes it (exact area × 510072000 / 4π)."""
    import s2geometry as s2

    out = []
    for text in s2id.to_pylist():
        if text is None:
            out.append(None)
            continue
        try:
            cell = s2.S2CellId(int(text) & _U64)
        except ValueError:
            raise ValueError(f"S2AreaInKm2: {text!r} is not an S2 cell id (a decimal 64-bit integer)") from None
        if not cell.is_valid():
            raise ValueError(f"S2AreaInKm2: {text!r} is not a valid S2 cell id")
        out.append(s2.S2Cell(cell).ExactArea() * _TOTAL_EARTH_AREA_KM2 / (4 * math.pi))
    return pa.array(out, pa.float64())
