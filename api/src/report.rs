//! Scan reports in html, json, sarif, csv and pdf.
